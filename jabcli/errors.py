"""The one exception type for mistakes a user can make and fix, and how to word them."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class JabError(Exception):
    """A user-facing error: the CLI prints its message as one line and exits with 2."""


def suggest(word: str, choices: Iterable[str]) -> str:
    """' (did you mean 'x'?)' for a close match, else ''."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
