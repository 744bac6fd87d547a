"""jab: train small Transformers on algorithmic toy tasks and look at what they learned.

From Python (see jabcli/api/api.py): `import jabcli as jab`, then `jab.train(...)`,
`jab.load(...)`; loaded lazily, so that `jab --help` imports no JAX.
"""

__version__ = "0.1.0"

from jabcli.api.names import API, CONTRACT  # the one list, which jabcli.api.api exports too


def __getattr__(name: str):
    if name in API:
        from jabcli.api import api

        return getattr(api, name)
    if name in CONTRACT:  # what a user's own task subclasses: no JAX imported for it
        import importlib

        return getattr(importlib.import_module(CONTRACT[name]), name)
    raise AttributeError(f"module 'jabcli' has no attribute {name!r}")
