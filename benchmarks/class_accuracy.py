"""How often a run with its working written out (`task.scratchpad`) ends on the right
class: the paper's score for a class task, where exact match also asks every symbol of
the working to be right.

    python benchmarks/class_accuracy.py RUN_OR_GROUP [LOW-HIGH] [SAMPLES]

Draws SAMPLES fresh inputs (default 4) at every length of LOW-HIGH (default 41-500) with
the task's own generator, answers them as `jab predict` does (each seed of a group), and
prints, per seed and as median [min-max], the share whose last symbol is the class and
the share whose whole answer is right.
"""

from __future__ import annotations

import sys

import jax
import numpy as np

from jabcli.api.api import Run
from jabcli.api.formatting import spread
from jabcli.inspection import inspection
from jabcli.runs import runs
from jabcli.tasks import sampling


def drawn(loaded, lengths: np.ndarray, width: int, seed: int) -> list[str]:
    """Fresh inputs of a loaded run's task, one of each length in `lengths`, as text."""
    task, tokenizer = loaded.experiment.task, loaded.experiment.tokenizer
    batch = sampling.sample_lengths(task, jax.random.PRNGKey(seed), lengths, width)
    return [tokenizer.decode(row) for row in np.asarray(batch.src)]


def main(path: str, lengths: str = "41-500", samples: str = "4") -> None:
    low, high = map(int, lengths.split("-"))
    seeds = runs.open_runs(path)[1]
    loaded = inspection.load(seeds[0].path, "latest")
    texts = drawn(loaded, np.repeat(np.arange(low, high + 1), int(samples)), high, 2026)
    classes, exact = [], []
    for seed in seeds:
        rows = Run(seed.path).predict(texts)
        classes.append(np.mean([r["output"][-1:] == r["expected"][-1] for r in rows]))
        exact.append(np.mean([r["correct"] for r in rows]))
        print(f"{seed.path.name}: class {classes[-1]:.1%}, whole answer {exact[-1]:.1%}")

    print(
        f"{len(texts)} inputs of {low}-{high}: class {spread(classes)}, "
        f"whole answer {spread(exact)}"
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
