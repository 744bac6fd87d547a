"""The one exception type for mistakes a user can make and fix (and its kind for an
exception raised inside the user's own code), and how to word them; the one warning for
what jab did in the user's stead (`Note`)."""

from __future__ import annotations

import difflib
import os
import traceback
from collections.abc import Iterable


class JabError(Exception):
    """A user-facing error: the CLI prints its message as one line and exits with 2."""


class UserCodeError(JabError):
    """An exception raised inside the user's own code: shown with the user's frames of its
    traceback (what they need to fix it), not as one line."""

    def __init__(self, what: str, err: BaseException, files: set[str]) -> None:
        files = {os.path.abspath(file) for file in files}
        frames = [
            frame
            for frame in traceback.extract_tb(err.__traceback__)
            if os.path.abspath(frame.filename) in files
        ]
        lines = "".join(traceback.format_list(frames))
        kind = "".join(traceback.format_exception_only(type(err), err)).strip()
        super().__init__(f"{what} raised {kind}")
        self.shown = f"Traceback (your code):\n{lines}{kind}\n"


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
