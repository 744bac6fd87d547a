"""ASCII stand-ins for what a stdout cannot encode (`PYTHONIOENCODING=ascii`, a latin-1
terminal): jab's drawing characters (bars, charts, heatmaps, plotext's frames, ✓ and ✗,
≥) and any other character of a task's or a user's, so that jab draws in plain
characters rather than dying of a UnicodeEncodeError. Rich already draws its tables' and
panels' boxes in ASCII for such a stdout; what is left is replaced here, on its way out.

Every stand-in is one character, as wide as what it replaces, so that columns, bars and
heatmaps keep their layout: ≥ becomes >, a heatmap's shades ░▒▓█ become .:*#, a bar
beyond training ▒ becomes :, a full one █ #. A character the encoding has is kept.
"""

from __future__ import annotations

import functools
import unicodedata

STAND_INS = {
    "✓": "v",
    "✗": "x",
    "×": "x",
    "·": ".",
    "→": ">",
    "□": "_",  # an answer slot (inspection.SLOT_LABEL)
    "●": "O",  # a curve's marker without colour: the others are ASCII already, o among them
    "≥": ">",
    "≤": "<",
    "–": "-",
    "—": "-",
    "−": "-",
    "‘": "'",
    "’": "'",
    "“": '"',
    "”": '"',
    "…": ".",
    "░": ".",
    "▒": ":",
    "▓": "*",
    "█": "#",
    # a chart's column tops (tables.EIGHTHS): low, then half and above
    **dict.fromkeys("▁▂▃", "."),
    **dict.fromkeys("▄▅▆▇", ":"),
}


def encodable(text: str, encoding: str | None) -> str:
    """`text` with each character `encoding` cannot encode replaced by its stand-in."""
    if not encoding:
        return text
    try:
        text.encode(encoding)
        return text
    except UnicodeEncodeError:
        return "".join(char if fits(char, encoding) else stand_in(char) for char in text)
    except LookupError:  # an encoding Python does not know: it could not write either
        return text


@functools.cache
def fits(char: str, encoding: str) -> bool:
    try:
        char.encode(encoding)
        return True
    except UnicodeEncodeError:
        return False


@functools.cache
def stand_in(char: str) -> str:
    """One ASCII character for `char`: its own stand-in, a box-drawing line's direction,
    a letter without its accent (é: e), or ?."""
    if char in STAND_INS:
        return STAND_INS[char]
    name = unicodedata.name(char, "")
    if name.startswith("BOX DRAWINGS"):  # plotext's frames, Rich's rules
        across = any(word in name for word in ("HORIZONTAL", "LEFT", "RIGHT"))
        down = any(word in name for word in ("VERTICAL", "UP", "DOWN"))
        if across and down:
            return "+"
        if down:
            return "|"
        return "=" if "HEAVY" in name or "DOUBLE" in name else "-"
    if 0x2580 <= ord(char) <= 0x259F:  # other block elements (plotext's fine markers)
        return "#"
    if 0x2800 <= ord(char) <= 0x28FF:  # braille dots
        return "."
    base = unicodedata.normalize("NFKD", char).encode("ascii", "ignore").decode()
    return base[:1] or "?"
