"""A study's records: one question asked of a grid of runs, each measured at every input
length.

A study file (YAML; its format and reading: study_file.py) names a base, the cells, the
seeds and the evaluation: a `Study` of `Cell`s, each measured as its `Evaluation` says. A
study folder holds `study.json` (study_folder.py) and each cell as an ordinary run folder
(a group of seeds when seeds > 1) named by its values, with `evaluation.json` beside its
checkpoints once it is measured (`CellEvaluation`). Every command that works on a run works
on a cell. What decides a cell's results is specs.py's, what a folder keeps
study_folder.py's, the table of results results.py's, running the cells study_run.py's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from typing_extensions import NotRequired  # typing has it from Python 3.11

from jabcli.core.errors import JabError
from jabcli.core.settings import Config

EVALUATION_FILE = "evaluation.json"  # in a cell's folder: what the study measured
LOGS = "logs"  # in the study folder: each cell worker's stderr


class Measure(TypedDict):
    """What decides the figures a study measures (`Evaluation.measure`), as its specs digest
    it and study.json keeps it."""

    lengths: list[int]
    samples: int
    force_length: bool
    seed: int


class EvaluateEntry(Measure):
    """A study's evaluation as study.json keeps it (`evaluate`): with the bins it reports."""

    bins: list[list[int]]


class CellEntry(TypedDict):
    """A cell as study.json lists it (study_folder.record); one recorded before train_spec
    existed has none."""

    name: str
    folder: str
    task: str
    spec: str
    train_spec: NotRequired[str]
    seeds: int
    steps: int


class StudyRecord(TypedDict):
    """A study folder's study.json (study_folder.record): the study file it ran, its cells
    (and those a later version of the file dropped), its evaluation and the cells that
    failed, with their errors."""

    format: int
    name: str
    source: str
    text: str
    cells: list[CellEntry]
    evaluate: EvaluateEntry
    failed: dict[str, str]  # cell folder: its error


class TrainedSpec(TypedDict):
    """What decides a cell's training, as its specs digest it (`specs.check`): its task as
    the study file writes it, and its config but for the keys that decide no result."""

    task: str
    config: dict[str, dict[str, object]]  # by section, each key's value


@dataclass(frozen=True)
class Evaluation:
    """How every cell is measured: `samples` held-out inputs at every length in
    `lengths`, as `jab eval --lengths`, reported over `bins`."""

    lengths: tuple[int, int] = (1, 64)
    samples: int = 20
    force_length: bool = False
    seed: int = 1
    bins: tuple[tuple[int, int], ...] = ()

    def to_dict(self) -> EvaluateEntry:
        return {**self.measure(), "bins": [list(b) for b in self.bins]}

    def measure(self) -> Measure:
        """What decides the figures measured (the bins only group them)."""
        return {
            "lengths": list(self.lengths),
            "samples": self.samples,
            "force_length": self.force_length,
            "seed": self.seed,
        }


@dataclass
class Cell:
    """One run of the study: a task and its config keys, trained with `seeds` seeds."""

    name: str  # as the table shows it
    folder: str  # its run folder's name inside the study folder
    task: str  # as jab train --task
    values: dict[str, Any]  # config keys set, as --set: the base's, then the cell's own
    seed: int
    seeds: int
    written: str = ""  # its task as the study file writes it (files relative to it)
    spec: str = ""  # a digest of everything that decides its results (see `check`)
    train_spec: str = ""  # a digest of what decides its training, but for train.steps
    config: Config | None = None  # resolved, once checked (`specs.check`)
    trained: TrainedSpec = field(default_factory=lambda: TrainedSpec(task="", config={}))

    @property
    def resolved(self) -> Config:
        """Its config, as `specs.check` resolved it (which every study run does first)."""
        assert self.config is not None, "specs.check resolves each cell's config first"
        return self.config

    @property
    def steps(self) -> int:
        return self.resolved.train.steps


@dataclass
class Study:
    name: str
    source: Path  # the study file
    cells: list[Cell]
    evaluation: Evaluation
    text: str  # the study file as read


class LengthFigures(TypedDict):
    """One seed's figures at one length, as a cell's evaluation.json keeps them (`Figures`
    but the samples); the forced ones only when measured with force_length."""

    token_acc: float
    symbol_acc: float
    seq_acc: float
    forced_seq_acc: NotRequired[float]
    forced_symbol_acc: NotRequired[float]


class SeedEvaluation(TypedDict):
    """One seed of a cell as its evaluation.json keeps it: every figure at each length."""

    seed: int
    per_length: dict[str, LengthFigures]


class CellEvaluation(TypedDict):
    """A cell's evaluation.json (written by `cell_job.work`): what was measured, with the
    spec it was measured for, and each seed's figures by length."""

    spec: str
    step: int
    task: str
    pos_encoding: str
    train_lengths: list[int]
    longest: int
    train_s: float
    eval_s: float
    seeds: list[SeedEvaluation]


def check_bins(bins, lengths: tuple[int, int], what: str) -> None:
    """Refuse a bin reaching outside the lengths measured: its figure would be missing or
    another bin's."""
    for low, high in bins:
        if low < lengths[0] or high > lengths[1]:
            raise JabError(
                f"{what}: {bin_name(low, high)} reaches outside the lengths measured "
                f"({bin_name(*lengths)}, evaluate.lengths)"
            )


def bin_name(low: int, high: int) -> str:
    return f"{low}-{high}"


def slug(name: str) -> str:
    """A folder name for `name`: 'sort none/randomized' -> 'sort-none-randomized'."""
    text = re.sub(r"[^A-Za-z0-9._=+-]+", "-", name).strip("-.")
    return text or "cell"
