"""A study's results as a table (`table`, what `jab study show` shows and `--json`
prints): per cell, its figures over seeds by bins of input lengths, the longest length at
>= 50% exact match and the exact match at each length (`measured`), or its state.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal, TypedDict

from typing_extensions import NotRequired  # typing has it from Python 3.11

from jabcli.core.lengths import length_range
from jabcli.core.spread import Spread, SpreadFigure
from jabcli.evaluation.figures import FigureName
from jabcli.studies.studies import (
    CellEntry,
    CellEvaluation,
    LengthFigures,
    bin_name,
    check_bins,
)
from jabcli.studies.study_folder import evaluation_of, recorded


class Measured(TypedDict, total=False):
    """A measured cell's figures (`measured`): each bin's (`bins`, and `token_bins`, ... by
    `BIN_KEYS`), the longest length at >= 50% and the exact match at each length, over
    seeds."""

    step: int
    train_s: float
    eval_s: float
    longest: int
    train_lengths: list[int]
    pos_encoding: str
    bins: dict[str, SpreadFigure]
    token_bins: dict[str, SpreadFigure]
    symbol_bins: dict[str, SpreadFigure]
    forced_bins: dict[str, SpreadFigure]
    forced_symbol_bins: dict[str, SpreadFigure]
    longest_at_half: SpreadFigure
    per_length: dict[str, SpreadFigure]


class CellRow(TypedDict):
    """A cell in a study's table (`table`): what it is and its state; once measured, its
    figures (`Measured`)."""

    name: str
    folder: str
    task: str
    seeds: int
    steps: int
    state: str  # measured, not finished or failed: <error>
    step: NotRequired[int]
    train_s: NotRequired[float]
    eval_s: NotRequired[float]
    longest: NotRequired[int]
    train_lengths: NotRequired[list[int]]
    pos_encoding: NotRequired[str]
    bins: NotRequired[dict[str, SpreadFigure]]
    token_bins: NotRequired[dict[str, SpreadFigure]]
    symbol_bins: NotRequired[dict[str, SpreadFigure]]
    forced_bins: NotRequired[dict[str, SpreadFigure]]
    forced_symbol_bins: NotRequired[dict[str, SpreadFigure]]
    longest_at_half: NotRequired[SpreadFigure]
    per_length: NotRequired[dict[str, SpreadFigure]]


class StudyTable(TypedDict):
    """A study's results (`table`), as `jab study show --json` prints them (with the
    metric shown added)."""

    study: str
    folder: str
    samples_per_length: int | None
    lengths: list[int] | None
    bins: list[str]
    force_length: bool
    cells: list[CellRow]
    metric: NotRequired[FigureName]  # the figure `jab study show` shows (default seq_acc)


def seed_figures(
    per_length: dict[str, LengthFigures], bins: Sequence[tuple[int, int]], metric: FigureName
) -> dict[str, float]:
    """One seed's `metric` averaged over the lengths of each bin it was measured at."""
    figures = {}
    for low, high in bins:
        values = [row[metric] for n, row in per_length.items() if low <= int(n) <= high]
        if values:
            figures[bin_name(low, high)] = sum(values) / len(values)
    return figures


def longest_at_half(per_length: dict[str, LengthFigures]) -> int:
    """The longest input length at which a seed answers at least half exactly."""
    return max((int(n) for n, row in per_length.items() if row["seq_acc"] >= 0.5), default=0)


def table(out: Path, bins: str | None = None) -> StudyTable:
    """The study's results: per cell, every bin's exact match (and token accuracy, and with
    force_length the exact match at the true length) as median, min and max over seeds,
    the longest length at >= 50%, and the state of cells not measured yet. `bins`
    ('1-40,41-500') groups the lengths otherwise than the study file."""
    data = recorded(out)
    evaluate = data.get("evaluate") or {}
    if bins is None:
        ranges = [(low, high) for low, high in evaluate.get("bins", [])]
    else:
        ranges = [length_range(b, "--bins") for b in bins.split(",")]
        low, high = evaluate.get("lengths", (1, 2**31))
        check_bins(ranges, (low, high), "--bins")
    failed = data.get("failed") or {}
    rows = []
    for cell in data["cells"]:
        result = evaluation_of(out, cell)
        row: CellRow = {
            "name": cell["name"],
            "folder": str(out / cell["folder"]),
            "task": cell["task"],
            "seeds": cell["seeds"],
            "steps": cell["steps"],
            "state": "measured" if result is not None else state(out, cell, failed),
        }
        if result is not None:
            row.update(measured(result, ranges))
        rows.append(row)
    return {
        "study": data["name"],
        "folder": str(out),
        "samples_per_length": evaluate.get("samples"),
        "lengths": evaluate.get("lengths"),
        "bins": [bin_name(*b) for b in ranges],
        "force_length": evaluate.get("force_length", False),
        "cells": rows,
    }


BinsName = Literal["bins", "token_bins", "symbol_bins", "forced_bins", "forced_symbol_bins"]
# Each figure a cell's evaluation holds per length, and the key of its bins in the row
# `measured` makes of the cell.
BIN_KEYS: dict[FigureName, BinsName] = {
    "seq_acc": "bins",
    "token_acc": "token_bins",
    "symbol_acc": "symbol_bins",
    "forced_seq_acc": "forced_bins",
    "forced_symbol_acc": "forced_symbol_bins",
}


def measured(result: CellEvaluation, bins: Sequence[tuple[int, int]]) -> Measured:
    """A cell's evaluation.json in figures: every bin's exact match (and token accuracy,
    and with force_length the exact match at the true length), the longest length at
    >= 50% and the exact match at each length, each as median, min and max over seeds."""
    seeds = result["seeds"]
    row: Measured = {
        "step": result["step"],
        "train_s": result["train_s"],
        "eval_s": result["eval_s"],
        "longest": result["longest"],
        "train_lengths": result["train_lengths"],
        "pos_encoding": result["pos_encoding"],
    }
    measures: LengthFigures | dict[str, float] = next(iter(seeds[0]["per_length"].values()), {})
    for metric, key in BIN_KEYS.items():
        if metric in measures:
            per_seed = [seed_figures(s["per_length"], bins, metric) for s in seeds]
            row[key] = {b: Spread.of(one[b] for one in per_seed).record() for b in per_seed[0]}
    longest = [longest_at_half(s["per_length"]) for s in seeds]
    row["longest_at_half"] = Spread.of(longest, reached=True).record()  # a length reached
    row["per_length"] = {
        n: Spread.of(s["per_length"][n]["seq_acc"] for s in seeds).record()
        for n in sorted(seeds[0]["per_length"], key=int)
    }
    return row


def state(out: Path, cell: CellEntry, failed: dict[str, str]) -> str:
    """A cell not measured yet: failed (with its error), or not finished."""
    if cell["folder"] in failed:
        return f"failed: {failed[cell['folder']]}"
    return "not finished"
