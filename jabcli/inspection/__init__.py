"""Saved runs read back: what `jab runs` lists, with each run's state and damage
(listing.py), and what `jab eval`, `compare`, `predict`, `show-attention` and `curves`
compute on saved runs and groups of seeds, as values (inspection.py)."""
