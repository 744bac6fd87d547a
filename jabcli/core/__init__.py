"""The ground every other layer stands on, knowing nothing of tasks, models or training:
`JabError` (the one exception for user mistakes, errors.py), every config key declared
once (settings.py), a config's YAML and `--set` layering and its checks (config.py; a new
run's whole layering, which needs the tasks, is experiment/resolve.py's), ranges of input
lengths (lengths.py), the character vocabulary (tokenizer.py), the process's JAX settings,
lazy imports and what is kept on disk for an experiment (runtime.py), how much memory a
run needs (memory.py), and the folds over a group's seeds (spread.py). Nothing here
imports JAX when it is imported."""
