"""Ranges of input lengths as a user writes them, `1-64` or one length `17`: the one
parser of `jab eval --lengths`, `jab compare --lengths`, `jab study show --bins`, a study
file's `evaluate.lengths` and `evaluate.bins`, and the API's `lengths="1-64"`."""

from __future__ import annotations

import re

from jabcli.core.errors import JabError

RANGE = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")


def length_range(text: object, what: str) -> tuple[int, int]:
    """'1-64' -> (1, 64); '17' or 17 -> (17, 17); anything else, or a range that is empty
    or starts below 1, is refused with one line naming `what` (the option or key)."""
    match = RANGE.fullmatch(str(text))
    low, high = (int(match[1]), int(match[2] or match[1])) if match else (0, 0)
    if match and low == 0:
        raise JabError(f"{what}: lengths start at 1, got {text!r}")
    if isinstance(text, bool) or not 1 <= low <= high:
        raise JabError(
            f"{what} takes a range like 1-64, shortest first (or one length like 17), got {text!r}"
        )
    return low, high
