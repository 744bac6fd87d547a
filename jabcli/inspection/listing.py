"""`jab runs`: one row per run, and per group of seeds, read from the run folders' files
alone (no JAX; of the checkpoints, only the newest is read, as a command loading it would
check it), with the state each is in; a run whose newest checkpoint or config is damaged
says what is wrong, and a folder jab made but cannot read is a row of its own saying why."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, TypedDict

from jabcli.core.errors import JabError
from jabcli.core.settings import short_name
from jabcli.runs.runs import GROUP_FILE, RUNS_DIR, STUDY_FILE, Mismatch, Run, runs_in
from jabcli.training import checkpoints, manifest

STATES = ("running", "interrupted", "no checkpoint", "finished", "target reached")


class RunRow(TypedDict):
    """One row of `jab runs` (and of its --json): a run, a group of seeds folded into one
    (`fold`), or a folder jab made but cannot read (`damaged`: None but its run, state and
    date). `state` is words to show; what a program decides on is read from the run
    itself (`Run.at_target`, its checkpoints)."""

    run: str
    task: str | None
    pos_encoding: str | None
    arch: str | None
    parameters: int | None
    flops_per_step: float | None
    seeds: int | None
    step: int | None
    steps: int | None
    best_eval_seq_acc: float | list[float | None] | None  # a group's: each seed's
    train_s: float | None
    state: str
    created: str | None


def summary(run: Run) -> RunRow:
    """What `jab runs` shows of one run."""
    cfg, _ = run.load_config()
    records = run.read_metrics()
    try:
        found = manifest.manifest(run)
    except manifest.ManifestDamaged as err:
        raise JabError(
            f"{err}; loading the run (jab eval, predict, resume) rebuilds it from its "
            "checkpoint files"
        ) from None
    listed = found["checkpoints"]
    scores = [r["eval_seq_acc"] for r in records if r.get("eval_seq_acc") is not None]
    step = listed[-1]["step"] if listed else 0
    usable = listed[-1] if listed else None  # the checkpoint commands load
    if run.is_running():
        state = "running"
    elif not listed:
        state = "no checkpoint"
    elif (damage := newest_damage(run, found)) is not None:
        state = f"damaged: {damage[0]}"
        usable = damage[1]
    elif run.at_target():
        state = "target reached"
    elif step >= cfg.train.steps:
        state = "finished"
    else:
        state = "interrupted"
    return {
        "run": str(run.path),
        "task": short_name(cfg.task.name),
        "pos_encoding": cfg.model.positions,
        "arch": cfg.model.arch,
        "parameters": checkpoints.parameter_count(run, usable) if usable else None,
        "flops_per_step": listed[-1].get("flops_per_step") if listed else None,
        "seeds": 1,
        "step": step,
        "steps": cfg.train.steps,
        "best_eval_seq_acc": max(scores) if scores else None,
        "train_s": training_seconds(records),
        "state": state,
        "created": run.created,
    }


def newest_damage(
    run: Run, found: manifest.Manifest
) -> tuple[str, manifest.CheckpointEntry | None] | None:
    """What is wrong with the newest checkpoint of `run` (listed in `found`, its
    manifest), checked as loading it would, and the checkpoint commands use instead (None:
    none); None when nothing is wrong."""
    try:
        checkpoints.load(run, found["checkpoints"][-1])
        return None
    except Mismatch as err:  # an edited config: refused, whichever checkpoint
        return str(err), None
    except JabError as err:
        damage = str(err)
    try:
        fallback, _ = checkpoints.chosen(run, found, "latest", lambda _: None)
    except JabError as err:  # no valid checkpoint left
        return str(err), None
    return f"{damage}; jab eval, predict and resume use step {fallback['step']}", fallback


def training_seconds(records: list[dict[str, Any]]) -> float:
    """Time spent training, over every session of a run: `elapsed_s` counts from the start
    of its session, so each session adds its last value."""
    total, last = 0.0, 0.0
    for record in records:
        elapsed = float(record.get("elapsed_s", 0.0))
        if elapsed < last:  # a new session (a resume) began
            total += last
        last = elapsed
    return total + last


# What a run folder holds besides its config: a folder with one of them and no config.yaml
# is a run whose config was lost, not a stranger's folder.
RUN_FILES = ("metrics.jsonl", "checkpoints", ".lock")


def listing(root: Path = RUNS_DIR) -> list[RunRow]:
    """One summary per run, and per group of seeds (its seeds folded into one row, see
    `fold`), under `root` (or `root` itself, when it is a run or a group), newest first; a
    run whose files cannot be read is a damaged row saying why; a folder that is neither
    a run nor a group (a study, someone else's) is skipped."""
    if (root.is_dir() and (root / "config.yaml").is_file()) or seed_group(root):
        return [row(root)]
    rows = []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        path = root / path.name  # as the user typed the root
        if path.is_dir() and (
            (path / "config.yaml").is_file()
            or seed_group(path)
            or any((path / name).exists() for name in RUN_FILES)
        ):
            rows.append(row(path))
    return sorted(rows, key=lambda r: r["created"] or "", reverse=True)


def seed_group(path: Path) -> bool:
    """Whether `path` is a group of seeds (its group.json, read or not)."""
    return (path / GROUP_FILE).is_file()


def row(path: Path) -> RunRow:
    """The row of the run or group of seeds at `path`; a damaged row if it cannot be read."""
    try:
        found = runs_in(path)
        if not found:
            raise JabError(f"{path}/config.yaml is missing")
        summaries = [summary(run) for run in found]
    except JabError as err:  # shown, not hidden: the user should know it is there
        return damaged(path, str(err))
    grouped = found[0].path != path  # seed-N folders inside it
    return fold(str(path), summaries) if grouped else summaries[0]


def studies_in(root: Path) -> list[Path]:
    """The study folders right under `root`, which `jab runs` lists no rows of (`jab runs
    STUDY` lists a study's cells)."""
    if not root.is_dir():
        return []
    return [root / p.name for p in sorted(root.iterdir()) if (p / STUDY_FILE).is_file()]


def damaged(path: Path, reason: str) -> RunRow:
    """A `jab runs` row for a folder jab made but cannot read, with why."""
    try:
        created = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(path.stat().st_mtime))
    except OSError:
        created = None
    return {
        "run": str(path),
        "task": None,
        "pos_encoding": None,
        "arch": None,
        "parameters": None,
        "flops_per_step": None,
        "seeds": None,
        "step": None,
        "steps": None,
        "best_eval_seq_acc": None,
        "train_s": None,
        "state": f"damaged: {reason}",
        "created": created,
    }


def fold(path: str, seeds: list[RunRow]) -> RunRow:
    """A group's row: the fewest steps any seed has done, each seed's best held-out exact
    match as a list, and the state of the seed furthest from done. `seeds` are rows of
    single runs (`summary`)."""
    steps: list[int] = []
    times: list[float] = []
    best: list[float | None] = []
    for seed in seeds:
        step, seconds, score = seed["step"], seed["train_s"], seed["best_eval_seq_acc"]
        assert step is not None and seconds is not None and not isinstance(score, list)
        steps.append(step)
        times.append(seconds)
        best.append(score)
    return {
        **seeds[0],
        "run": path,
        "seeds": len(seeds),
        "step": min(steps),
        "best_eval_seq_acc": best,
        "train_s": max(times),
        "state": min((s["state"] for s in seeds), key=order),
    }


def order(state: str) -> int:
    """How far from done a state is: a damaged seed makes its group damaged."""
    return -1 if state.startswith("damaged") else STATES.index(state)
