"""What a running study tells: each cell's worker to the driver, one JSON line an event on
its stdout (`WorkerEvent`: made by cell_job.py, read back by the backends, local.py and
ray_backend.py), and the driver to its `StudyObserver` (a terminal's or a notebook's view).
Light on purpose: the views import it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from jabcli.studies.studies import Cell, CellEvaluation, Study


class WorkerEvent(NamedTuple):
    """One event of a cell's worker: begin (step, steps), log (step, loss), eval (step,
    seq_acc), evaluating, done, or note (message); the figures are the median over the
    cell's seeds."""

    event: str
    step: int | None = None
    steps: int | None = None  # begin: the steps the cell trains to
    loss: float | None = None  # log: the training loss
    seq_acc: float | None = None  # eval: the held-out exact match
    message: str | None = None  # note: a line for the cell's log

    def to_json(self) -> str:
        """The line the worker writes: the event and what it carries, no more."""
        return json.dumps({k: v for k, v in self._asdict().items() if v is not None})

    @classmethod
    def from_json(cls, line: bytes | str) -> WorkerEvent | None:
        """The event a worker's line holds; None for a line that holds none."""
        try:
            data = json.loads(line)
        except ValueError:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("event"), str):
            return None
        return cls(**{k: v for k, v in data.items() if k in cls._fields})


class StudyObserver:
    """What running a study reports, as it happens; every method may be left out."""

    def begin(self, study: Study, out: Path, todo: list[Cell], workers: str) -> None:
        """`todo` are the cells to run (the others are measured already)."""

    def note(self, message: str) -> None:
        """Something worth telling before the cells run: a cell trained again, say."""

    def started(self, cell: Cell) -> None:
        pass

    def event(self, cell: Cell, event: WorkerEvent) -> None:
        """A worker's event: begin (step, steps), log (step, loss), eval (step, seq_acc),
        evaluating, done."""

    def finished(self, cell: Cell, evaluation: CellEvaluation) -> None:
        pass

    def failed(self, cell: Cell, error: str) -> None:
        pass

    def stopped(self, cell: Cell) -> None:
        """An interrupted cell: its checkpoints are kept, a rerun resumes it."""

    def end(self) -> None:
        pass
