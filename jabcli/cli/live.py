"""The live views, redrawn in place while work runs: training's progress bar over its
latest metrics and held-out figures (`TrainView`), and a study's bar over every cell with a
line per running cell (`StudyView`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Group
from rich.live import Live
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from jabcli.api.formatting import (
    percent,
    plural,
    spread,
    study_figure,
    training_header,
)
from jabcli.cli.display import console, live, say
from jabcli.core.settings import short_name
from jabcli.core.spread import every_seed
from jabcli.studies.events import StudyObserver, WorkerEvent
from jabcli.training.session import Observer

if TYPE_CHECKING:
    from pathlib import Path

    from jabcli.evaluation.figures import HeldOutResult
    from jabcli.runs.metrics import LogRecord
    from jabcli.studies.studies import Cell, CellEvaluation, Study


class Ending(TimeRemainingColumn):
    """'ETA 0:01:15' while training runs; how it ended, once it has."""

    def render(self, task) -> Text:
        if task.fields.get("ended"):
            return Text(task.fields["ended"])
        return Text("ETA ") + super().render(task)


class TrainView(Observer):
    """Live view of a training run: a progress bar over the latest batch's metrics and
    the latest held-out evaluation, side by side in two labelled columns. For a group of
    seeds, every figure is the median [min-max] over the seeds."""

    def __init__(self) -> None:
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[speed]}"),
            Ending(),
            console=console,
        )
        self.metrics: list[LogRecord] = []  # the latest record of each seed
        self.eval: list[HeldOutResult] = []  # the latest evaluation of each seed
        self.live: Live | None = None
        self.target = 1.0
        self.stopped = False  # a first signal came: training stops after this chunk

    def note(self, message: str) -> None:
        say(message)

    def begin(self, path, experiment, start_step: int, parameters: int, flops=None) -> None:
        cfg = experiment.config
        self.target = cfg.train.target_seq_acc
        say(training_header(experiment, path, parameters, flops))
        self.bar = self.progress.add_task(
            short_name(cfg.task.name),
            total=cfg.train.steps,
            completed=start_step,
            speed="",
            ended="",
        )
        self.live = live(self.render())
        self.live.__enter__()

    def stopping(self, signum: int) -> None:
        super().stopping(signum)
        self.stopped = True
        if self.live is not None:
            self.progress.update(self.bar, ended="stopping")

    def end(self) -> None:
        if self.live is not None:
            # Stopped before a first step (while compiling, say): its frame of dashes
            # would say nothing, so it goes.
            self.live.transient = not self.metrics
            self.live.update(self.render())
            self.live.__exit__(None, None, None)
            self.live = None
            if self.metrics and not console.is_terminal:  # Live ends a terminal's last
                console.line()  # line, not a file's

    def render(self) -> Group:
        m, ev = self.metrics, self.eval
        table = Table(box=box.SIMPLE_HEAD, header_style="bold")
        table.add_column("", style="bold", overflow="fold")
        table.add_column("training batch", justify="right", overflow="fold")
        table.add_column("held-out", justify="right", overflow="fold")
        table.add_row(
            "step", cell([r.step for r in m[:1]], str), cell([e.step for e in ev[:1]], str)
        )
        table.add_row("loss", cell([r.loss for r in m], "{:.4f}".format))
        table.add_row(
            "token acc",
            cell([r.token_acc for r in m], percent),
            cell([e.scores["token_acc"] for e in ev], percent),
        )
        table.add_row(
            "exact match",
            cell([r.seq_acc for r in m], percent),
            cell([e.scores["seq_acc"] for e in ev], percent),
        )
        table.add_row("learning rate", cell([r.lr for r in m[:1]], "{:.2e}".format))
        parts: list[Any] = [self.progress, table]
        if len(ev) > 1:
            reached = sum(e.at_target for e in ev)  # the Trainer's word
            parts.append(
                Text(
                    f"{reached} of {len(ev)} seeds at the target {percent(self.target)}; "
                    "figures are median [min-max] over seeds"
                )
            )
        return Group(*parts)

    def log(self, records: list[LogRecord]) -> None:
        self.metrics = records
        first = records[0]
        # Every seed evaluated at this step reached the target: the Trainer stops here.
        ev = self.eval
        reached = bool(ev) and ev[0].step == first.step and every_seed([e.at_target for e in ev])
        self.progress.update(
            self.bar,
            completed=first.step,
            speed=f"{first.steps_per_sec:.0f} steps/s",
            ended="target reached" if reached else "stopping" if self.stopped else "",
        )
        if reached:
            self.progress.stop_task(self.bar)
        if self.live is not None:
            self.live.update(self.render())

    def evaluated(self, results: list[HeldOutResult]) -> None:
        self.eval = results
        first = results[0]
        seeds = f", median [min-max] of {len(results)} seeds" if len(results) > 1 else ""
        console.print(
            f"step {first.step:>6}  held-out: token acc "
            f"{spread([r.scores['token_acc'] for r in results])}, exact match "
            f"{spread([r.scores['seq_acc'] for r in results])} "
            f"({plural(first.scores['samples'], 'sample')}{seeds})",
            markup=False,
        )


def cell(values: list[float], show: Callable[[float], str]) -> Text | str:
    """A figure of the latest records (one value per seed), or '-' before there is one."""
    if not values:
        return "-"
    return Text(spread(values, show))


class StudyView(StudyObserver):
    """Live view of a study: a bar over every cell's training steps with ETA, a line per
    running cell (step, loss, held-out exact match) and a line per cell as it ends."""

    def __init__(self) -> None:
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[cells]}"),
            TimeRemainingColumn(),
            console=console,
        )
        self.running: dict[str, dict[str, str]] = {}  # each running cell's columns
        self.steps: dict[str, int] = {}  # each running cell's step, as last reported
        self.live: Live | None = None

    def begin(self, study: Study, out: Path, todo: list[Cell], workers: str) -> None:
        self.total = len(study.cells)
        self.done = self.total - len(todo)
        self.bins = study.evaluation.bins
        console.print(
            Text.assemble(
                "Study ",
                (study.name, "bold"),
                f" into {out}: {plural(self.total, 'cell')}, {plural(len(todo), 'cell')} to run, "
                f"{workers}",
            )
        )
        steps = sum(cell.steps for cell in todo)
        self.bar = self.progress.add_task("steps", total=max(steps, 1), cells=self.count())
        self.live = live(self.render())
        self.live.__enter__()

    def count(self) -> str:
        return f"{self.done}/{self.total} cells"

    def note(self, message: str) -> None:
        console.print(message, markup=False, highlight=False)

    def render(self) -> Group:
        table = Table(box=box.SIMPLE_HEAD, header_style="bold")
        for column in ("running", "step", "loss", "held-out"):
            table.add_column(
                column, justify="left" if column == "running" else "right", overflow="fold"
            )
        for name, row in self.running.items():
            table.add_row(
                Text(name), row.get("step", "-"), row.get("loss", "-"), row.get("held-out", "-")
            )
        return Group(self.progress, table) if self.running else Group(self.progress)

    def update(self) -> None:
        self.progress.update(self.bar, cells=self.count())
        if self.live is not None:
            self.live.update(self.render())

    def started(self, cell: Cell) -> None:
        self.running[cell.name] = {"step": "starting"}
        self.update()

    def progress_of(self, cell: Cell, step: int) -> None:
        before = self.steps.get(cell.name, 0)
        self.progress.advance(self.bar, max(0, step - before))
        self.steps[cell.name] = step

    def event(self, cell: Cell, event: WorkerEvent) -> None:
        row = self.running.setdefault(cell.name, {})
        kind = event.event
        if kind == "begin" and event.step is not None:
            self.progress_of(cell, event.step)
            row["step"] = f"{event.step}/{event.steps}"
        elif kind == "log" and event.step is not None:
            self.progress_of(cell, event.step)
            row["step"] = f"{event.step}/{cell.steps}"
            row["loss"] = f"{event.loss:.4f}"
        elif kind == "eval" and event.seq_acc is not None:
            row["held-out"] = percent(event.seq_acc)
        elif kind == "evaluating":
            row["step"] = "measuring"
        self.update()

    def ended(self, cell: Cell, line: Text) -> None:
        self.running.pop(cell.name, None)
        self.progress_of(cell, cell.steps)
        console.print(line)
        self.update()

    def finished(self, cell: Cell, evaluation: CellEvaluation) -> None:
        from jabcli.studies.studies import bin_name
        from jabcli.studies.study_results import measured

        self.done += 1
        figures = measured(evaluation, self.bins)["bins"]
        parts = ", ".join(
            f"{bin_name(*b)} {study_figure(figures.get(bin_name(*b)))}" for b in self.bins
        )
        self.ended(cell, Text.assemble(("done ", "green"), (cell.name, "bold"), f": {parts}"))

    def failed(self, cell: Cell, error: str) -> None:
        self.ended(cell, Text.assemble(("failed ", "red"), (cell.name, "bold"), f": {error}"))

    def stopped(self, cell: Cell) -> None:
        self.running.pop(cell.name, None)
        self.update()

    def end(self) -> None:
        if self.live is not None:
            self.update()
            self.live.__exit__(None, None, None)
            self.live = None
            if not console.is_terminal:
                console.line()
