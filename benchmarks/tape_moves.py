"""How a trained Tape-RNN moves its tape, read from the picture `jab show-attention`
draws of it (`inspection.attention`: each cell's size after each token read).

    python benchmarks/tape_moves.py RUN [LENGTH ...]      # default lengths: 10 20 30 45 60

For each seed of RUN (a run or a group of seeds) and one held-out input of each LENGTH
(drawn as `jab eval` draws them, with evaluation seed 0), the move of each step
is estimated as the roll of the ring that best maps the cells' sizes after the previous
step onto those after this one (the least summed absolute difference). A move is a mixture
of the five actions (stay, one cell either way, the input's length either way): the
estimate names the one that dominates. The first three steps, whose cells hold almost
nothing, are left out. Prints a table: per seed, the inputs answered right and how many
steps moved by 0, +1, -1, +L, -L (L the input's length) or otherwise.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import numpy as np

from jabcli.core import runtime
from jabcli.evaluation.evaluate import draw_held_out
from jabcli.inspection import attention, inspection
from jabcli.runs import runs

MOVES = ("0", "+1", "-1", "+L", "-L", "other")


def move(before: np.ndarray, after: np.ndarray, length: int) -> str:
    """The roll of a ring of cells' sizes `before` [M] that best gives `after` [M]."""
    cells = len(after)
    shift = int(np.argmin([np.abs(np.roll(before, k) - after).sum() for k in range(cells)]))
    shift = shift if shift <= cells // 2 else shift - cells
    return {0: "0", 1: "+1", -1: "-1", length: "+L", -length: "-L"}.get(shift, "other")


def main(path: str, lengths: list[int]) -> None:
    runtime.configure()  # the compilation cache, as every jab command has it
    seeds = runs.open_runs(Path(path))[1]
    experiment = inspection.load(seeds[0].path).experiment
    key = inspection.evaluation_key(0)
    inputs = [
        experiment.tokenizer.decode(np.asarray(draw_held_out(experiment, key, 1, n, n).src[0]))
        for n in lengths
    ]
    print(f"{path}: one held-out input of each of the lengths {', '.join(map(str, lengths))}\n")
    print("| seed | answered right | " + " | ".join(f"steps {m}" for m in MOVES) + " |")
    print("|---|---:|" + "---:|" * len(MOVES))
    for seed in seeds:
        loaded, counts, right = inspection.load(seed.path), collections.Counter(), 0
        for text in inputs:
            picture = attention.attention(loaded, text)
            symbols = len(text)  # the jump: the input's symbols (recurrent.py)
            right += picture.answer == picture.expected
            sizes = picture.weights[0, 0]
            for step in range(3, len(sizes)):
                counts[move(sizes[step - 1], sizes[step], symbols)] += 1
        cells = " | ".join(str(counts[m]) for m in MOVES)
        print(f"| {seed.path.name} | {right} of {len(inputs)} | {cells} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1], [int(n) for n in sys.argv[2:]] or [10, 20, 30, 45, 60])
