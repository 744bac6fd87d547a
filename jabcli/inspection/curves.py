"""What `jab curves` computes on a saved run: one metric over its steps, as metrics.jsonl
recorded it; of a group of seeds, the median at each step with the min and max as a band
(core/spread.py's `Spread.by_step`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from jabcli.core.errors import JabError, suggest
from jabcli.core.spread import Spread
from jabcli.runs import runs

METRICS = ("loss", "token_acc", "seq_acc", "eval_token_acc", "eval_seq_acc", "lr", "grad_norm")


@dataclass
class Curve:
    """One metric of a run over its steps; of a group of seeds, the median at each step
    with the min and max as a band (`low`, `high`; None for one run)."""

    name: str
    metric: str
    steps: list[int]
    values: list[float]
    low: list[float] | None = None
    high: list[float] | None = None


def curve(path: Path | None, metric: str) -> Curve:
    """`metric` as recorded in metrics.jsonl by a run, or by every seed of a group (at the
    steps every seed has)."""
    if metric not in METRICS:
        raise JabError(
            f"unknown metric {metric!r}{suggest(metric, METRICS)}; one of: {', '.join(METRICS)}"
        )
    path, seeds = runs.open_runs(path)
    series = [
        {r["step"]: r[metric] for r in run.read_metrics() if r.get(metric) is not None}
        for run in seeds
    ]
    steps = sorted(set.intersection(*(set(one) for one in series)))
    if not steps:
        kind = "no held-out evaluation" if metric.startswith("eval") else "no metrics"
        raise JabError(f"{path} has {kind} yet (nothing to draw for {metric})")
    values = [[one[step] for step in steps] for one in series]
    name = str(path)
    if len(seeds) == 1:
        return Curve(name, metric, steps, np.asarray(values[0]).tolist())
    medians, lows, highs = (list(column) for column in zip(*Spread.by_step(values)))
    return Curve(f"{name} (median of {len(seeds)} seeds)", metric, steps, medians, lows, highs)
