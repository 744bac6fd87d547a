"""A study folder: its study.json (the cells as last run, with their specs, and the
failures so far: `record`, `recorded`), a cell's evaluation.json if it is measured for the
cell's current spec (`evaluation_of`), and what the folder keeps of a study about to run
in it (`check_folder` -> `FolderPlan`): refused, kept, measured again or trained again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard, cast

from jabcli.core.errors import JabError
from jabcli.runs.runs import STUDY_FILE, atomic_write
from jabcli.studies.specs import same_training, upgrade
from jabcli.studies.studies import (
    EVALUATION_FILE,
    Cell,
    CellEntry,
    CellEvaluation,
    Evaluation,
    Study,
    StudyRecord,
    bin_name,
)


def record(study: Study, out: Path, failed: dict[str, str]) -> None:
    """Write study.json: the study file, each cell's spec, and the failures so far. A cell
    the file no longer names keeps its entry while its folder is there: its results stay
    part of the study, and putting it back in the file finds it as it was."""
    current = {c.folder for c in study.cells}
    try:
        earlier = [
            c
            for c in recorded(out)["cells"]
            if is_entry(c)
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
                "steps": c.steps,
            }
            for c in study.cells
        ]
        + earlier,
        "evaluate": study.evaluation.to_dict(),
        "failed": failed,
    }
    atomic_write(out / STUDY_FILE, json.dumps(data, indent=1).encode())


def is_entry(cell: object) -> TypeGuard[CellEntry]:
    """Whether a cell study.json lists is one (an object; a damaged file's may not be)."""
    return isinstance(cell, dict)


def recorded(out: Path) -> StudyRecord:
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
    return cast(StudyRecord, data)  # as `record` writes it (older ones: what each lacks, .get)


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
    entries = {c.get("folder"): c for c in before["cells"] if is_entry(c)}
    evaluate = before.get("evaluate")
    evaluated = evaluate if isinstance(evaluate, dict) else {}
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
        if (
            same_training(cell, entry, evaluated)
            and isinstance(steps, int)  # a study.json entry has its steps
            and (cell.steps >= steps or progress(out / cell.folder) <= cell.steps)
        ):
            changes = changed_evaluation(evaluated, study.evaluation)
            if cell.steps != steps:
                changes.insert(0, f"train.steps {steps} -> {cell.steps}")
            if changes or not measured:
                what = "measured again, its training kept" if measured else "its training is kept"
                plan.kept[cell.folder] = f"{what} ({', '.join(changes) or 'its evaluation'})"
            continue
        settings = changed_settings(cell, out / cell.folder)
        if measured:
            raise JabError(
                f"cell {cell.name!r} in {out} was measured with other training settings than "
                f"{study.source} now gives it ({settings}); to run the changed study, name a "
                "new --out"
            )
        plan.restart[cell.folder] = settings
    listed = before.get("failed")
    failed = dict(listed) if isinstance(listed, dict) else {}
    plan.failed = {k: v for k, v in failed.items() if k not in plan.restart}
    return plan


def progress(path: Path) -> int:
    """The step a cell's folder has trained to (its seeds' fewest); 0 without checkpoints."""
    from jabcli.runs import runs
    from jabcli.training import manifest

    try:
        _, seeds = runs.open_runs(path)
        return min(
            (listed[-1]["step"] if (listed := manifest.entries(run)) else 0) for run in seeds
        )
    except JabError:
        return 0


def changed_evaluation(before: Mapping[str, object], now: Evaluation) -> list[str]:
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
    for section, values in cell.resolved.to_dict().items():
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


def evaluation_of(out: Path, cell: Cell | CellEntry) -> CellEvaluation | None:
    """A cell's evaluation.json, if it is measured with the cell's current spec."""
    folder = cell.folder if isinstance(cell, Cell) else cell["folder"]
    spec = cell.spec if isinstance(cell, Cell) else cell["spec"]
    try:
        data = json.loads((out / folder / EVALUATION_FILE).read_text())
    except (OSError, ValueError):
        return None
    measured = isinstance(data, dict) and data.get("spec") == spec
    return cast(CellEvaluation, data) if measured else None  # as cell_job writes it
