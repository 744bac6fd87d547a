"""Training: rows packed two examples each (packing.py), the `TrainingState` with pure
`init` / `update` steps and the `Trainer` loop (training.py), what it did (`Trained`,
trained.py), the checkpoint format that saves and loads a training state (checkpoints.py)
and the manifest listing a run's checkpoints (manifest.py), and `jab train` as a library
call: a Trainer, its run folder and Ctrl-C, reporting to an `Observer` (session.py)."""
