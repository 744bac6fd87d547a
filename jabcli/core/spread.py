"""The folds over a group's seeds, each computed here once and read everywhere else: a
figure as its median, min and max (`Spread`), and whether every seed reached the target
(`every_seed`).

The median rule: a figure's median is the true median, of an even number of seeds the
mean of the middle two (`Spread.of`, and `Spread.by_step` for curves). A figure that must
be one a seed actually reached, the longest input length at >= 50% exact match, takes the
lower middle instead (`Spread.of(..., reached=True)`): of lengths 17 and 20, 17, never 18.5.

The shapes that carry a spread are built from it too: a study's `{"median", "min", "max"}`
(`Spread.record`), a group's `seq_acc` with `seq_acc_range` (`Spread.keyed`), and the words
`median [min-max]` (api/formatting.py's `spread`).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import NamedTuple, TypedDict


class SpreadFigure(TypedDict):
    """A figure over seeds as study.json and `jab study show --json` keep it (a `Spread`)."""

    median: float
    min: float
    max: float


class Spread(NamedTuple):
    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Iterable[float], *, reached: bool = False) -> Spread:
        """The true median (of an even number of seeds, the mean of the middle two); with
        `reached`, the lower middle one, a value some seed had."""
        values = list(values)
        middle = statistics.median_low if reached else statistics.median
        return cls(middle(values), min(values), max(values))

    @staticmethod
    def by_step(series: Sequence[Sequence[float]]) -> list[Spread]:
        """The spread at each step of curves of the same steps, one curve per seed (the
        true median, as `of`; a NaN at a step makes that step's figures NaN)."""
        import numpy as np

        values = np.asarray(series)
        columns = zip(
            np.median(values, axis=0).tolist(),
            values.min(axis=0).tolist(),
            values.max(axis=0).tolist(),
        )
        return [Spread(*column) for column in columns]

    def record(self) -> SpreadFigure:
        """As study.json and `jab study show --json` keep a figure over seeds."""
        return {"median": self.median, "min": self.low, "max": self.high}

    def keyed(self, name: str) -> dict[str, float | list[float]]:
        """As a group's evaluation keeps the figure `name`: the median under `name`, the
        min and max under `<name>_range`."""
        return {name: float(self.median), f"{name}_range": [self.low, self.high]}


def every_seed(at_target: Sequence[bool]) -> bool:
    """Whether every seed reached the target, from each seed's word (`at_target`, the
    Trainer's, or a saved run's `Run.at_target`); no seed evaluated is no target reached.
    Training stops early exactly when this holds."""
    return bool(at_target) and all(at_target)
