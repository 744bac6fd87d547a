"""Run folders on disk: a run's config, metrics, config fingerprint and lock, groups of
seeds and study folders (runs.py), and the training logs written beside them for
TensorBoard and W&B (loggers.py)."""
