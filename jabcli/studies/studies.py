"""Studies: one question asked of a grid of runs, each measured at every input length.

A study file (YAML; its format and reading: study_file.py) names a base, the cells, the
seeds and the evaluation.

A study folder holds `study.json` (the cells as last run, and any failures), and each
cell as an ordinary run folder (a group of seeds when seeds > 1) named by its values,
with `evaluation.json` beside its checkpoints once it is measured. Every command that
works on a run works on a cell. This module holds a study's records (`Study`, `Cell`,
`Evaluation`), lays out the folder and turns evaluations into tables; `study_file.py`
reads and checks study files, `study_run.py` runs the cells.
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from typing_extensions import NotRequired  # typing has it from Python 3.11

from jabcli.core import settings
from jabcli.core.errors import JabError
from jabcli.core.lengths import length_range
from jabcli.core.spread import Spread
from jabcli.runs.runs import STUDY_FILE, atomic_write

if TYPE_CHECKING:
    from jabcli.evaluation.evaluate import Figures

EVALUATION_FILE = "evaluation.json"  # in a cell's folder: what the study measured
LOGS = "logs"  # in the study folder: each cell worker's stderr


@dataclass(frozen=True)
class Evaluation:
    """How every cell is measured: `samples` held-out inputs at every length in
    `lengths`, as `jab eval --lengths`, reported over `bins`."""

    lengths: tuple[int, int] = (1, 64)
    samples: int = 20
    force_length: bool = False
    seed: int = 1
    bins: tuple[tuple[int, int], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {**self.measure(), "bins": [list(b) for b in self.bins]}

    def measure(self) -> dict[str, Any]:
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
    config: dict[str, Any] = field(default_factory=dict)  # resolved, once checked
    trained: dict[str, Any] = field(default_factory=dict)  # its task and config, as specs read

    @property
    def steps(self) -> int:
        return self.config["train"]["steps"]


@dataclass
class Study:
    name: str
    source: Path  # the study file
    cells: list[Cell]
    evaluation: Evaluation
    text: str  # the study file as read


def check_bins(bins, lengths: tuple[int, int], what: str) -> None:
    """Refuse a bin reaching outside the lengths measured: its figure would be missing or
    another bin's."""
    for low, high in bins:
        if low < lengths[0] or high > lengths[1]:
            raise JabError(
                f"{what}: {bin_name(low, high)} reaches outside the lengths measured "
                f"({bin_name(*lengths)}, evaluate.lengths)"
            )


def slug(name: str) -> str:
    """A folder name for `name`: 'sort none/randomized' -> 'sort-none-randomized'."""
    text = re.sub(r"[^A-Za-z0-9._=+-]+", "-", name).strip("-.")
    return text or "cell"


def check(study: Study) -> list[Any]:
    """Build every cell's experiment as `jab train` would, before any cell starts: a bad
    key or value is one error naming the cell. Sets each cell's resolved config and its
    spec, and returns the experiments."""
    from jabcli.experiment.resolve import resolve
    from jabcli.training.training import check as check_training

    experiments = []
    defaults, declared = settings.Config().to_dict(), settings.keys()
    for cell in study.cells:
        try:
            experiment = resolve(
                cell.task,
                seed=cell.seed,
                seeds=cell.seeds,
                overrides=cell.values,
                source=str(study.source),
            )
            check_training(experiment)
            high, longest = study.evaluation.lengths[1], experiment.longest_input()
            if high > longest:  # measured as asked, never cut short
                raise JabError(
                    f"evaluate.lengths goes up to {high}, but its model takes inputs of at "
                    f"most {longest} symbols (model.max_positions = "
                    f"{experiment.config.model.max_positions}); lower the one or raise the other"
                )
        except JabError as err:
            raise JabError(f"cell {cell.name!r}: {err}") from None
        cell.config = experiment.config.to_dict()
        # As the file writes it: the same study run from another folder is the same study.
        config = {**cell.config, "task": {**cell.config["task"], "name": cell.written}}
        # A key that decides no result (where logs go) is left out: changing it reruns nothing.
        config = {
            section: {k: v for k, v in values.items() if declared[f"{section}.{k}"].results}
            for section, values in config.items()
        }
        for section, key in ADDED_LATER:  # at its default, as the cell was before the key
            if config[section].get(key) == defaults[section][key]:
                config[section] = {k: v for k, v in config[section].items() if k != key}
        cell.trained = {"task": cell.written, "config": config}
        cell.spec = digest({**cell.trained, "evaluate": study.evaluation.measure()})
        cell.train_spec = digest(with_steps(cell.trained, None))
        experiments.append(experiment)
    return experiments


def with_steps(trained: dict[str, Any], steps: int | None) -> dict[str, Any]:
    """A cell's task and config with train.steps set to `steps` (None: left out)."""
    train = {k: v for k, v in trained["config"]["train"].items() if k != "steps"}
    if steps is not None:
        train["steps"] = steps
    return {**trained, "config": {**trained["config"], "train": train}}


# The config keys jab had when the first study folders were measured (e14df94). A key
# added since is left out of a cell's spec while it has its default, so a study measured
# before the key existed keeps its cells.
KEYS_WHEN_STUDIES_BEGAN = frozenset({
    "task.name", "task.min_len", "task.max_len", "task.alphabet", "task.shift",
    "task.reverse_answer", "task.index_hints", "task.held_out",
    "model.d_model", "model.num_heads", "model.num_layers", "model.d_ff", "model.dropout",
    "model.norm", "model.activation", "model.pos_encoding", "model.src_pos_encoding",
    "model.tgt_pos_encoding", "model.max_positions",
    "train.batch_size", "train.pack", "train.steps", "train.learning_rate",
    "train.warmup_steps", "train.weight_decay", "train.clip_norm", "train.seed", "train.seeds",
    "train.log_every", "train.eval_every", "train.eval_samples", "train.target_seq_acc",
    "train.keep_checkpoints", "train.log_to",
})  # fmt: skip
ADDED_LATER = tuple(
    tuple(key.split(".")) for key in settings.keys() if key not in KEYS_WHEN_STUDIES_BEGAN
)


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


# the study folder


def record(study: Study, out: Path, failed: dict[str, str]) -> None:
    """Write study.json: the study file, each cell's spec, and the failures so far. A cell
    the file no longer names keeps its entry while its folder is there: its results stay
    part of the study, and putting it back in the file finds it as it was."""
    current = {c.folder for c in study.cells}
    try:
        earlier = [
            c
            for c in recorded(out)["cells"]
            if isinstance(c, dict)
            and c.get("folder") not in current
            and (out / str(c.get("folder"))).is_dir()
        ]
    except JabError:  # a new study folder
        earlier = []
    data = {
        "format": 1,
        "name": study.name,
        "source": str(study.source),
        "text": study.text,
        "cells": [
            {
                "name": c.name,
                "folder": c.folder,
                "task": c.task,
                "spec": c.spec,
                "train_spec": c.train_spec,
                "seeds": c.seeds,
                "steps": c.config["train"]["steps"],
            }
            for c in study.cells
        ]
        + earlier,
        "evaluate": study.evaluation.to_dict(),
        "failed": failed,
    }
    atomic_write(out / STUDY_FILE, json.dumps(data, indent=1).encode())


def recorded(out: Path) -> dict[str, Any]:
    """A study folder's study.json."""
    path = out / STUDY_FILE
    if not out.is_dir():
        raise JabError(f"study folder {str(out)!r} does not exist")
    if not path.is_file():
        raise JabError(f"{out} is not a study folder (it has no {STUDY_FILE})")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        raise JabError(f"{path} is corrupted (not valid JSON)") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise JabError(f"{path} is corrupted (unexpected contents)")
    return data


@dataclass
class FolderPlan:
    """What a study folder keeps of the study about to run in it (`check_folder`)."""

    failed: dict[str, str] = field(default_factory=dict)  # cell folder: its error so far
    # Cells started but not measured whose training settings changed: they train again
    # from step 0 (folder: what changed).
    restart: dict[str, str] = field(default_factory=dict)
    # Cells whose training is kept but that are measured (again): their evaluation or
    # train.steps changed (folder: what becomes of it, and what changed).
    kept: dict[str, str] = field(default_factory=dict)


def check_folder(study: Study, out: Path) -> FolderPlan:
    """Refuse a folder that is not this study's: not empty and no study.json, another
    study's, or a measured cell that the file now trains otherwise (naming what changed).
    A cell whose training settings are the same is kept, however its evaluation changed
    (it is measured again; a change of evaluate.bins alone measures nothing again), and
    so is one whose train.steps grew (it trains on) or shrank to no less than it has
    done. Called by `run` before anything is written."""
    if out.exists() and not out.is_dir():
        raise JabError(f"{out} is a file, not a study folder")
    if not out.exists() or not any(out.iterdir()):
        return FolderPlan()
    if not (out / STUDY_FILE).is_file():
        raise JabError(f"{out} already exists and is not a study folder; choose another --out")
    before = recorded(out)
    if before.get("name") != study.name:
        raise JabError(
            f"{out} holds the study {before.get('name')!r}, not {study.name!r} of "
            f"{study.source}; choose another --out"
        )
    entries = {c.get("folder"): c for c in before["cells"] if isinstance(c, dict)}
    evaluated = before.get("evaluate") if isinstance(before.get("evaluate"), dict) else {}
    plan = FolderPlan()
    for cell in study.cells:
        entry = entries.get(cell.folder)
        if not (out / cell.folder).exists():
            continue
        if entry is None:
            raise JabError(
                f"{out}/{cell.folder} exists but is no cell of the study in {out}; name a new --out"
            )
        upgrade(out, cell, entry, evaluated, study.evaluation)
        if entry.get("spec") == cell.spec:
            continue
        measured = evaluation_of(out, entry) is not None
        steps = entry.get("steps")
        if same_training(cell, entry, evaluated) and (
            cell.steps >= steps or progress(out / cell.folder) <= cell.steps
        ):
            changes = changed_evaluation(evaluated, study.evaluation)
            if cell.steps != steps:
                changes.insert(0, f"train.steps {steps} -> {cell.steps}")
            if changes or not measured:
                what = "measured again, its training kept" if measured else "its training is kept"
                plan.kept[cell.folder] = f"{what} ({', '.join(changes) or 'its evaluation'})"
            continue
        changes = changed_settings(cell, out / cell.folder)
        if measured:
            raise JabError(
                f"cell {cell.name!r} in {out} was measured with other training settings than "
                f"{study.source} now gives it ({changes}); to run the changed study, name a "
                "new --out"
            )
        plan.restart[cell.folder] = changes
    failed = before.get("failed")
    failed = dict(failed) if isinstance(failed, dict) else {}
    plan.failed = {k: v for k, v in failed.items() if k not in plan.restart}
    return plan


def same_training(cell: Cell, entry: dict[str, Any], evaluated: dict[str, Any]) -> bool:
    """Whether a cell of the folder (its study.json entry) was trained as the file trains
    it now, train.steps aside."""
    if "train_spec" in entry:
        return entry["train_spec"] == cell.train_spec
    # Recorded before train_spec: its spec digests its training and the whole evaluation.
    legacy = {**with_steps(cell.trained, entry.get("steps")), "evaluate": evaluated}
    return entry.get("spec") == digest(legacy)


def upgrade(
    out: Path, cell: Cell, entry: dict[str, Any], evaluated: dict[str, Any], now: Evaluation
) -> None:
    """A cell measured before specs left out the bins, measured as the file still measures
    it: its evaluation.json is given the spec of today, so that it stays measured (its
    figures by length are the same, whatever the bins). `entry` is updated too."""
    if "train_spec" in entry or entry.get("steps") != cell.steps:
        return
    if {k: v for k, v in evaluated.items() if k != "bins"} != now.measure():
        return
    if not same_training(cell, entry, evaluated):
        return
    path = out / cell.folder / EVALUATION_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = None
    if isinstance(data, dict) and data.get("spec") == entry.get("spec"):
        atomic_write(path, json.dumps({**data, "spec": cell.spec}).encode())
    entry.update(spec=cell.spec, train_spec=cell.train_spec)


def progress(path: Path) -> int:
    """The step a cell's folder has trained to (its seeds' fewest); 0 without checkpoints."""
    from jabcli.runs import runs
    from jabcli.training import checkpoints

    try:
        _, seeds = runs.open_runs(path)
        return min(
            (listed[-1]["step"] if (listed := checkpoints.entries(run)) else 0) for run in seeds
        )
    except JabError:
        return 0


def changed_evaluation(before: dict[str, Any], now: Evaluation) -> list[str]:
    """'evaluate.samples 10 -> 12' for each setting of the measurement that differs."""
    current = now.measure()
    return [
        f"evaluate.{key} {shown(before.get(key))} -> {shown(value)}"
        for key, value in current.items()
        if before.get(key) != value
    ]


def changed_settings(cell: Cell, path: Path) -> str:
    """What the file changed of a cell's training since its folder was made, as
    'model.d_model 64 -> 128, train.steps 3000 -> 4000'."""
    from jabcli.runs import runs

    try:
        _, seeds = runs.open_runs(path)
        old = seeds[0].load_config()[0].to_dict()
    except JabError:
        return "its settings"
    changes = []
    for section, values in cell.config.items():
        for key, value in values.items():
            if (section, key) in (("train", "seed"), ("train", "seeds"), ("train", "log_to")):
                continue
            earlier = old.get(section, {}).get(key)
            if earlier != value:
                changes.append(f"{section}.{key} {shown(earlier)} -> {shown(value)}")
    return ", ".join(changes) or "its settings"


def shown(value: Any) -> str:
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return bin_name(*value)
    return str(value)


def evaluation_of(out: Path, cell: Cell | dict) -> CellEvaluation | None:
    """A cell's evaluation.json, if it is measured with the cell's current spec."""
    folder = cell.folder if isinstance(cell, Cell) else cell["folder"]
    spec = cell.spec if isinstance(cell, Cell) else cell["spec"]
    try:
        data = json.loads((out / folder / EVALUATION_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("spec") == spec else None


# results


class SpreadFigure(TypedDict):
    """A figure over seeds as study.json and `jab study show --json` keep it (a `Spread`)."""

    median: float
    min: float
    max: float


class SeedEvaluation(TypedDict):
    """One seed of a cell as its evaluation.json keeps it: every figure at each length."""

    seed: int
    per_length: dict[str, Figures]


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


class CellRow(TypedDict):
    """A cell in a study's table (`table`): what it is and its state; once measured, its
    figures (`measured`): each bin's (`bins`, and `token_bins`, ... by `BIN_KEYS`), the
    longest length at >= 50% and the exact match at each length, over seeds."""

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


def bin_name(low: int, high: int) -> str:
    return f"{low}-{high}"


def seed_figures(per_length: dict[str, dict[str, float]], bins, metric: str) -> dict[str, float]:
    """One seed's `metric` averaged over the lengths of each bin it was measured at."""
    figures = {}
    for low, high in bins:
        values = [row[metric] for n, row in per_length.items() if low <= int(n) <= high]
        if values:
            figures[bin_name(low, high)] = sum(values) / len(values)
    return figures


def longest_at_half(per_length: dict[str, dict[str, float]]) -> int:
    """The longest input length at which a seed answers at least half exactly."""
    return max((int(n) for n, row in per_length.items() if row["seq_acc"] >= 0.5), default=0)


def spread(values: list[float]) -> SpreadFigure:
    """A figure over seeds as study.json keeps it."""
    median, low, high = Spread.of(values)
    return {"median": median, "min": low, "max": high}


def table(out: Path, bins: str | None = None) -> StudyTable:
    """The study's results: per cell, every bin's exact match (and token accuracy, and with
    force_length the exact match at the true length) as median, min and max over seeds,
    the longest length at >= 50%, and the state of cells not measured yet. `bins`
    ('1-40,41-500') groups the lengths otherwise than the study file."""
    data = recorded(out)
    evaluate = data.get("evaluate") or {}
    if bins is None:
        bins = [tuple(b) for b in evaluate.get("bins", [])]
    else:
        bins = [length_range(b, "--bins") for b in bins.split(",")]
        check_bins(bins, tuple(evaluate.get("lengths", (1, 2**31))), "--bins")
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
            row.update(measured(result, bins))
        rows.append(row)
    return {
        "study": data["name"],
        "folder": str(out),
        "samples_per_length": evaluate.get("samples"),
        "lengths": evaluate.get("lengths"),
        "bins": [bin_name(*b) for b in bins],
        "force_length": evaluate.get("force_length", False),
        "cells": rows,
    }


# Each figure a cell's evaluation holds per length, and the key of its bins in the row
# `measured` makes of the cell.
BIN_KEYS = {
    "seq_acc": "bins",
    "token_acc": "token_bins",
    "symbol_acc": "symbol_bins",
    "forced_seq_acc": "forced_bins",
    "forced_symbol_acc": "forced_symbol_bins",
}


def measured(result: CellEvaluation, bins: list[tuple[int, int]]) -> dict[str, Any]:
    """A cell's evaluation.json in figures: every bin's exact match (and token accuracy,
    and with force_length the exact match at the true length), the longest length at
    >= 50% and the exact match at each length, each as median, min and max over seeds."""
    seeds = result["seeds"]
    row = {
        "step": result["step"],
        "train_s": result["train_s"],
        "eval_s": result["eval_s"],
        "longest": result["longest"],
        "train_lengths": result["train_lengths"],
        "pos_encoding": result["pos_encoding"],
    }
    measures = next(iter(seeds[0]["per_length"].values()), {})
    for metric, key in BIN_KEYS.items():
        if metric in measures:
            per_seed = [seed_figures(s["per_length"], bins, metric) for s in seeds]
            row[key] = {b: spread([one[b] for one in per_seed]) for b in per_seed[0]}
    longest = [longest_at_half(s["per_length"]) for s in seeds]
    # A length the seeds reached: of an even number of seeds, the lower middle one.
    row["longest_at_half"] = {**spread(longest), "median": statistics.median_low(longest)}
    row["per_length"] = {
        n: spread([s["per_length"][n]["seq_acc"] for s in seeds])
        for n in sorted(seeds[0]["per_length"], key=int)
    }
    return row


def state(out: Path, cell: dict[str, Any], failed: dict[str, str]) -> str:
    """A cell not measured yet: failed (with its error), or not finished."""
    if cell["folder"] in failed:
        return f"failed: {failed[cell['folder']]}"
    return "not finished"
