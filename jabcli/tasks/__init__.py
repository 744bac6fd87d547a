"""The tasks a model learns: the contract a task defines (contract.py), what jab derives
from it once (derived.py: tokens, decoder slots, alignment; sampling.py: batches), the
arrays they are made of (batch.py), index hints as a wrapper (hinted.py), the built-in
tasks on strings, classes, numbers and expressions modulo a number (strings.py,
classification.py, arithmetic.py, modular.py, with the bracketed expressions' array code
in bracket_arrays.py), `file:PATH` tasks read from a data file (datafile.py) and `TASKS`,
the built-in tasks by name (registry.py). Tasks sample on the device, but import JAX only
when they first sample, so that `jab tasks` never does."""
