"""Where a run of the brackets with their working (`task.scratchpad`) first goes wrong
beyond its training lengths: under which symbol, at which position, how deep in the
nesting, and how far back the `(` of a `)` is.

    python benchmarks/bracket_mistakes.py RUN [LOW-HIGH] [SAMPLES]

Draws SAMPLES fresh inputs (default 4) at every length of LOW-HIGH (default 41-120),
answers them as `jab predict` does, and prints the counts for the first wrong symbol of
each wrong answer, beside the deepest nesting of 2000 inputs of the training lengths.
"""

from __future__ import annotations

import collections
import sys

import numpy as np
from class_accuracy import drawn

from jabcli.api.api import Run
from jabcli.inspection import inspection


def depths(text: str) -> list[int]:
    """The nesting under each symbol (a bracket's own symbols count as inside it)."""
    depth, under = 0, []
    for symbol in text:
        depth += symbol == "("
        under.append(depth)
        depth -= symbol == ")"
    return under


def opening(text: str, at: int) -> int:
    """Where the `(` of the `)` at `at` is."""
    depth = 0
    for k in range(at, -1, -1):
        depth += (text[k] == ")") - (text[k] == "(")
        if depth == 0:
            return k
    raise ValueError(f"no ( for the ) at {at} of {text!r}")


def main(path: str, lengths: str = "41-120", samples: str = "4") -> None:
    low, high = map(int, lengths.split("-"))
    loaded = inspection.load(path, "latest")
    train_high = loaded.experiment.config.task.max_len
    training = drawn(
        loaded, np.repeat(np.arange(1, train_high + 1), 2000 // train_high), train_high, 8
    )
    deepest = max(max(depths(text)) for text in training)
    texts = drawn(loaded, np.repeat(np.arange(low, high + 1), int(samples)), high, 7)
    rows = Run(path).predict(texts)
    wrong = [row for row in rows if not row["correct"]]
    under, positions, spans, deeper = collections.Counter(), [], [], 0
    for row in wrong:
        text = row["input"]
        at = next(i for i, (a, b) in enumerate(zip(row["output"], row["expected"])) if a != b)
        if at >= len(text):
            under["the class"] += 1
            continue
        under[text[at]] += 1
        positions.append(at)
        deeper += depths(text)[at] > deepest
        if text[at] == ")":
            spans.append(at - opening(text, at))
    print(f"{len(wrong)} of {len(rows)} answers of {low}-{high} wrong; the first wrong symbol")
    print(f"  under: {dict(under)}")
    print(
        f"  at a position past the training lengths ({train_high}): "
        f"{sum(p >= train_high for p in positions)}"
    )
    print(f"  deeper than any of 2000 training inputs ({deepest}): {deeper}")
    if spans:
        print(
            f"  under a ): its ( a median {np.median(spans):.0f} symbols back, "
            f"{sum(s >= train_high for s in spans)} of {len(spans)} more than {train_high - 1}"
        )


if __name__ == "__main__":
    main(*sys.argv[1:])
