"""Running a study: every cell in a process of its own, N at a time on this machine or as
Ray tasks on a cluster; Ctrl-C stops them all cleanly and a rerun picks up where they
stopped.

The driver (`run`) checks every cell, writes study.json and creates each cell's run
folder (as `jab train` would, untrained), then hands cells to a backend: worker processes
on this machine (local.py) or Ray tasks (ray_backend.py), behind the same few methods
(`open`, `free`, `start`, `events`, `stop`, `ended`). A worker is
`python -m jabcli.cli.worker STUDY_DIR CELL` running `cell_job.work`: it trains the cell
with `session.resume` (from step 0, or from the checkpoint an interrupted study left),
measures it with what `jab eval --lengths` calls, and writes `evaluation.json` into the
cell's folder. It reports progress as JSON lines on stdout and errors on stderr (kept in
the study's logs/ folder); its exit status says how it ended.
"""

from __future__ import annotations

import os
import shutil
import signal
from dataclasses import dataclass, field
from pathlib import Path

from jabcli.core import devices
from jabcli.core.errors import JabError
from jabcli.studies import specs, study_folder
from jabcli.studies.events import StudyObserver
from jabcli.studies.local import INTERRUPTED, LocalCells, died
from jabcli.studies.ray_backend import RayCells, restore
from jabcli.studies.studies import Cell, Study


@dataclass
class Summary:
    out: Path
    measured: list[Cell] = field(default_factory=list)  # before and during this run
    failed: dict[str, str] = field(default_factory=dict)  # cell name: error
    stopped: list[Cell] = field(default_factory=list)  # interrupted, or never started
    interrupted_by: int | None = None


def default_workers() -> int:
    """One cell per core: a step of jab's small models keeps about one core busy. On 2
    cores, four 3-seed cells of 300 steps took 99 s one at a time, 70 s two at a time and
    74 s four at a time (see README, Studies)."""
    return os.cpu_count() or 1


def run(
    study: Study,
    out: Path,
    workers: int | None = None,
    observer: StudyObserver | None = None,
    ray_address: str | None = None,
    cpus_per_cell: float = 1.0,
    gpus_per_cell: float = 0.0,
) -> Summary:
    """Run every cell of `study` not measured yet into the study folder `out`."""
    devices.share_accelerator()  # before this process's checks start JAX's client
    observer = observer or StudyObserver()
    if workers is not None and workers < 1:
        raise JabError(f"--workers must be at least 1, got {workers}")
    backend = (
        RayCells(ray_address, cpus_per_cell, gpus_per_cell)
        if ray_address is not None
        else LocalCells(workers or default_workers())
    )
    experiments = specs.check(study)
    for cell in study.cells if out.is_dir() else []:
        restore(out / cell.folder)
    plan = study_folder.check_folder(study, out)
    failed = plan.failed
    summary = Summary(out)
    by_folder = {cell.folder: cell for cell in study.cells}
    stop = Stop()
    todo: list[Cell] = []
    try:
        with stop, backend.open(out) as cells:
            todo = [cell for cell in study.cells if study_folder.evaluation_of(out, cell) is None]
            observer.begin(study, out, todo, backend.describe())
            for folder, changes in plan.kept.items():
                observer.note(f"{by_folder[folder].name}: {changes}")
            for folder, changes in plan.restart.items():  # said before it is done
                observer.note(
                    f"{by_folder[folder].name}: trains again from step 0, its training "
                    f"settings changed ({changes})"
                )
            prepare(study, out, experiments, plan, summary)
            running: set[str] = set()
            while True:
                while not stop.signum and todo and cells.free():
                    cell = todo.pop(0)
                    cells.start(cell)
                    running.add(cell.folder)
                    observer.started(cell)
                for folder, event in cells.events(timeout=0.2):
                    if folder in running:  # not a late event of a cell that has ended
                        observer.event(by_folder[folder], event)
                while stop.forwarded < stop.count:
                    assert stop.signum is not None  # set with each signal counted
                    if stop.forwarded == 0 and cells.running():
                        from jabcli.training.session import stopping_line

                        observer.note(stopping_line(stop.signum, cells=True))
                    cells.stop(stop.signum, second=stop.forwarded > 0)
                    stop.forwarded += 1
                for folder, code, error in cells.ended():
                    running.discard(folder)
                    cell = by_folder[folder]
                    evaluation = study_folder.evaluation_of(out, cell) if code == 0 else None
                    if evaluation is not None:
                        failed.pop(folder, None)
                        summary.measured.append(cell)
                        observer.finished(cell, evaluation)
                    elif stop.signum and code in INTERRUPTED:
                        summary.stopped.append(cell)
                        observer.stopped(cell)
                    else:
                        failed[folder] = error or died(code)
                        summary.failed[cell.name] = failed[folder]
                        observer.failed(cell, failed[folder])
                    study_folder.record(study, out, failed)
                if not cells.running() and (stop.signum or not todo):
                    break
    finally:
        observer.end()
    summary.stopped += todo
    # A stop that came when every cell had ended stopped nothing.
    summary.interrupted_by = stop.signum if summary.stopped else None
    return summary


def prepare(study: Study, out: Path, experiments, plan: study_folder.FolderPlan, summary) -> None:
    """Write study.json and create the run folder of every cell that has none (as `jab
    train` would, untrained), or whose training settings changed before it was measured;
    the cells measured already go into `summary`."""
    from jabcli.training import session

    out.mkdir(parents=True, exist_ok=True)
    for folder in plan.restart:  # an unmeasured cell the file now trains otherwise
        shutil.rmtree(out / folder)
    study_folder.record(study, out, plan.failed)
    for cell, experiment in zip(study.cells, experiments):
        if not (out / cell.folder).exists():
            session.create(experiment, out / cell.folder)
    summary.measured += [c for c in study.cells if study_folder.evaluation_of(out, c) is not None]


class Stop:
    """SIGINT and SIGTERM, noted for the driver's loop to forward to its workers (a
    second one is forwarded too: the workers then stop at once)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.count = 0  # signals received
        self.forwarded = 0  # signals passed on to the workers

    def __enter__(self) -> Stop:
        self.previous = {s: signal.signal(s, self.handle) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self.previous.items():
            signal.signal(s, handler)

    def handle(self, signum: int, frame) -> None:
        self.signum = signum
        self.count += 1
