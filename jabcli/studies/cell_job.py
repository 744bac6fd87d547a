"""A worker's job on one cell of a study (jabcli/cli/worker.py is its process): train it
to its steps, resuming what is there, measure it, write its evaluation.json, and report
as it goes, as JSON events for the driver."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from jabcli.core.errors import JabError
from jabcli.core.spread import Spread
from jabcli.studies import studies, study_folder
from jabcli.studies.events import WorkerEvent
from jabcli.training.session import Observer

if TYPE_CHECKING:
    from jabcli.evaluation.figures import Figures, HeldOutResult
    from jabcli.experiment.experiment import Experiment
    from jabcli.runs.metrics import LogRecord

Emit = Callable[[WorkerEvent], None]  # an event to the driver


class CellObserver(Observer):
    """A training session's events as JSON lines on stdout, for the driver."""

    def __init__(self, emit: Emit) -> None:
        self.emit = emit

    def begin(
        self,
        path: Path,
        experiment: Experiment,
        start_step: int,
        parameters: int,
        flops: float | None = None,
    ) -> None:
        self.emit(WorkerEvent("begin", step=start_step, steps=experiment.config.train.steps))

    def note(self, message: str) -> None:
        self.emit(WorkerEvent("note", message=message))

    def warn(self, message: str) -> None:
        self.note(message)  # the cell's log is where its notes go

    def resuming(self, path: Path, step: int, fresh: bool) -> None:
        if not fresh:  # a cell that has not begun just begins
            self.note(f"Resuming {path} from step {step}")

    def log(self, records: list[LogRecord]) -> None:
        loss = Spread.of(r.loss for r in records).median  # of the seeds
        self.emit(WorkerEvent("log", step=records[0].step, loss=loss))

    def evaluated(self, results: list[HeldOutResult]) -> None:
        score = Spread.of(r.scores["seq_acc"] for r in results).median
        self.emit(WorkerEvent("eval", step=results[0].step, seq_acc=score))

    def stopping(self, signum: int) -> None:
        pass  # the driver says it, once for the whole study

    def end(self) -> None:
        pass


def work(out: Path, folder: str, emit: Emit) -> int:
    """Train the cell `folder` of the study folder `out` to its steps (resuming what is
    there), measure it, and write its evaluation.json; returns the exit status."""
    from jabcli.core import runtime
    from jabcli.evaluation.evaluate import HeldOut
    from jabcli.inspection import inspection, listing
    from jabcli.runs import runs
    from jabcli.training import session

    runtime.configure()
    record = study_folder.recorded(out)
    cell = next((c for c in record["cells"] if c.get("folder") == folder), None)
    if cell is None:
        raise JabError(f"{out}/{study_folder.STUDY_FILE} has no cell {folder!r}")
    path = out / folder
    _, seeds = runs.open_runs(path)
    steps = cell["steps"]  # the study's, which may have grown or shrunk since it started
    if not all(session.trained_enough(run, steps) for run in seeds):
        outcome = session.resume(path, steps, CellObserver(emit))
        if outcome.interrupted_by is not None:
            return 128 + outcome.interrupted_by
    emit(WorkerEvent("evaluating"))
    evaluate = record["evaluate"]
    tic = time.perf_counter()
    _, loaded = inspection.load_runs(path, "latest")
    experiment = loaded[0].experiment
    low = max(evaluate["lengths"][0], experiment.task.min_length)
    high = evaluate["lengths"][1]  # every cell's model takes it (`specs.check`)
    held_out = HeldOut(
        evaluate["samples"],
        low,
        high,
        each_length=True,
        force_length=evaluate["force_length"],
    )
    result = inspection.evaluate_runs(path, loaded, held_out, seed=evaluate["seed"])
    evaluation: studies.CellEvaluation = {
        "spec": cell["spec"],
        "step": result["step"],
        "task": result["task"],
        "pos_encoding": result["pos_encoding"],
        "train_lengths": result["train_lengths"],
        "longest": high,
        "train_s": max(listing.training_seconds(run.read_metrics()) for run in seeds),
        "eval_s": time.perf_counter() - tic,
        "seeds": [
            {
                "seed": run.load_config()[0].train.seed,  # as the seed's own run says
                "per_length": {str(n): kept(row) for n, row in each["per_length"].items()},
            }
            for run, each in zip(seeds, result.get("seeds", [result]), strict=True)
        ],
    }
    runs.atomic_write(path / studies.EVALUATION_FILE, json.dumps(evaluation).encode())
    emit(WorkerEvent("done"))
    return 0


def kept(row: Figures) -> studies.LengthFigures:
    """What a cell's evaluation.json keeps of a seed's figures at one length."""
    figures: studies.LengthFigures = {
        "token_acc": row["token_acc"],
        "symbol_acc": row["symbol_acc"],
        "seq_acc": row["seq_acc"],
    }
    if "forced_seq_acc" in row:
        figures["forced_seq_acc"] = row["forced_seq_acc"]
    if "forced_symbol_acc" in row:
        figures["forced_symbol_acc"] = row["forced_symbol_acc"]
    return figures
