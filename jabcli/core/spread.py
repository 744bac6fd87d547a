"""A figure over seeds, as jab reports every figure of a group: its median, min and max.
The one place that computes them; the JSON shapes that carry them (`seq_acc` with
`seq_acc_range`, a study's `{"median", "min", "max"}`) and the words that show them
(`median [min-max]`) are built from a `Spread`."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import NamedTuple


class Spread(NamedTuple):
    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread:
        """The true median (of an even number of seeds, the mean of the middle two)."""
        values = list(values)
        return cls(statistics.median(values), min(values), max(values))
