"""Saved runs read back: what `jab runs` lists, with each run's state and damage
(listing.py); a run or group of seeds loaded at a checkpoint, and what `jab eval`,
`compare` and `predict` compute on it (inspection.py), `show-attention` (attention.py) and
`curves` (curves.py), as values."""
