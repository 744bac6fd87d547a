"""The one exception type for mistakes a user can make and fix, and how to word them;
the one warning for what jab did in the user's stead (`Note`)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class JabError(Exception):
    """A user-facing error: the CLI prints its message as one line and exits with 2."""


class Note(UserWarning):
    """Something jab did that the user should know of (a damaged checkpoint passed over,
    a manifest rebuilt): a warning from Python, one line on stderr from the CLI."""


# jab's optional extras (pyproject.toml) and the package each installs: a hint names the
# package, which pip finds however jab was installed ('jab[plots]' only where jab itself
# came from a package index, '.[plots]' only in its checkout).
EXTRAS = {"plots": "matplotlib", "ray": "ray", "tensorboard": "tensorboardX", "wandb": "wandb"}


def install(extra: str) -> str:
    """What to type to get the optional extra `extra`: 'pip install matplotlib'."""
    return f"pip install {EXTRAS[extra]}"


def suggest(word: str, choices: Iterable[str]) -> str:
    """' (did you mean 'x'?)' for a close match, else ''."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def whole(value: object, what: str, least: int, most: int | None = None) -> int:
    """`value` if it is a whole number from `least` (to `most`), else the error that says
    so, naming `what`: a study file's counts and the API's arguments are checked alike."""
    if type(value) is not int or value < least or (most is not None and value > most):
        bounds = f"of at least {least}" if most is None else f"from {least} to {most}"
        raise JabError(f"{what} must be a whole number {bounds}, got {value!r}")
    return value
