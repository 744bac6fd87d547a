"""Run folders on disk: a run's config, metrics, config fingerprint and lock, groups of
seeds and study folders (runs.py), a new run's folders claimed before anything is written
(claim.py), metrics.jsonl read back (metrics.py), a run's copies of the user's code
(code_copies.py), files written whole (files.py), and the training logs written beside
them for TensorBoard and W&B (loggers.py)."""
