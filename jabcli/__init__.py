"""jab: train small Transformers on algorithmic toy tasks and look at what they learned.

From Python (see jabcli/api/api.py): `import jabcli as jab`, then `jab.train(...)`,
`jab.load(...)`; loaded lazily, so that `jab --help` imports no JAX.
"""

__version__ = "0.1.0"

API = (  # the public API, in one place: jabcli.api.api's __all__ too
    "train",
    "load",
    "compare",
    "curves",
    "study",
    "load_study",
    "StudyResults",
    "Run",
    "Result",
    "Comparison",
    "Predictions",
    "Curves",
    "Attention",
    "JabError",
)


def __getattr__(name: str):
    if name in API:
        from jabcli.api import api

        return getattr(api, name)
    raise AttributeError(f"module 'jabcli' has no attribute {name!r}")
