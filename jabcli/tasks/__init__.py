"""The tasks a model learns: the task contract and the tasks on strings (tasks.py), the
tasks on numbers (arithmetic.py), `file:PATH` tasks read from a data file (datafile.py) and
`TASKS`, the built-in tasks by name (registry.py). Tasks sample on the device, but import
JAX only when they first sample, so that `jab tasks` never does."""
