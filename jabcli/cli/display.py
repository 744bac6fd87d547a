"""Everything jab draws in the terminal with Rich: the live training view, result
tables and attention heatmaps. Shapes and colours still read with NO_COLOR set:
heatmap cells use block characters whose density follows the weight.

Nothing a user typed or a model answered is ever cut to fit the terminal: long values
fold onto the next line, bars and charts shrink, and a heatmap too wide for the
terminal is drawn at its own width.
"""

from __future__ import annotations

import contextlib
import html
import io
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich import box
from rich.columns import Columns
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.measure import Measurement
from rich.padding import Padding
from rich.panel import Panel
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from jabcli.api.formatting import (
    figure,
    model_form,
    percent,
    plural,
    run_labels,
    spread,
    study_cells,
    study_figure,
    study_heading,
    training_header,
)
from jabcli.api.plots import Plot, study_plot
from jabcli.cli.pipes import QuietStdout
from jabcli.core.config import at_target
from jabcli.core.runtime import Lazy
from jabcli.core.tokenizer import is_hint_token
from jabcli.runs.runs import atomic_write
from jabcli.training.session import Observer, Outcome

np = Lazy("numpy")  # for heatmaps and medians only: `jab tasks` need not import it


console = Console(file=QuietStdout())

SHADES = " ░▒▓█"
BAR_WIDTH = 20  # the longest bar of an accuracy, in characters


def say(line: str) -> None:
    """Print `line` as is: paths and inputs are not Rich markup."""
    console.print(line, markup=False, highlight=False)


def live(renderable: RenderableType) -> Live:
    """A view redrawn in place. It leaves sys.stdout alone: jab prints through `console`,
    whose file writes to whatever sys.stdout is, so Rich's stdout redirection would send
    the console's own output back into itself, forever (a terminal only; pipes have no
    live view). Warnings on stderr still print above the view."""
    return Live(
        renderable, console=console, refresh_per_second=4, transient=False, redirect_stdout=False
    )


@contextlib.contextmanager
def decoding(passes: int, what: str = "decoding"):
    """A bar with ETA on stderr while held-out inputs are decoded in `passes` rounds of
    `decode.decode_rows` (a group's seeds, compared runs, forced lengths): shown in a
    terminal only, once decoding has taken more than a second, and gone when it ends."""
    from jabcli.evaluation.decode import reporting

    err = Console(stderr=True)
    if not err.is_terminal:
        yield
        return
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    )
    task = bar.add_task(what, total=passes)
    started, rounds, shown = time.monotonic(), -1, False

    def report(done: int, total: int) -> None:
        nonlocal rounds, shown
        rounds += done == 0
        bar.update(task, completed=min(passes, rounds + (done / total if total else 1)))
        if not shown and time.monotonic() - started > 1.0:
            bar.start()
            shown = True

    try:
        with reporting(report):
            yield
    finally:
        if shown:
            bar.stop()


def titled(title: str, body: RenderableType) -> Group:
    """A bold title line over `body` (a table's own title would wrap to the table's width)."""
    return Group(Text(title, style="bold"), body)


def facts(rows: list[tuple[str, str]]) -> Table:
    """Names and values, two columns; a long value folds rather than being cut."""
    table = Table(box=box.SIMPLE_HEAD, show_header=False)
    table.add_column("what", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    for name, value in rows:
        table.add_row(name, Text(value))  # plain text: a value like "[0-1]" is no markup
    return table


@dataclass
class Fitted:
    """A table when the width has room for every word of it, else `narrow`, the same
    figures as lines that wrap at spaces: nothing is cut, and no word is split."""

    wide: Table
    narrow: RenderableType

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        ranges = self.ranges(console)
        room = options.max_width - self.wide._extra_width
        least, most = sum(r[0] for r in ranges), sum(r[1] for r in ranges)
        if least > room:
            yield self.narrow
            return
        if most > room:  # Rich would squeeze columns below their longest word: share out
            spare = room - least
            slack = [high - low for low, high in ranges]
            for column, (low, _), give in zip(self.wide.columns, ranges, slack):
                column.width = low + spare * give // max(1, sum(slack)) - 2
        yield self.wide

    def ranges(self, console: Console) -> list[tuple[int, int]]:
        """Each column's narrowest width with no cell cut (a no_wrap column as wide as its
        widest cell, any other as its longest word) and its widest, padding included."""
        options = console.options.update_width(10**4)
        found = []
        for column in self.wide.columns:
            sizes = [Measurement.get(console, options, c) for c in (column.header, *column.cells)]
            widest = max(m.maximum for m in sizes)
            least = widest if column.no_wrap else max(m.minimum for m in sizes)
            found.append((least + 2, widest + 2))  # the table's padding, a space each side
        return found


def lines(blocks: list[list[str]]) -> Group:
    """Blocks of lines, each block's first line bold and the rest indented, a blank line
    between blocks: the narrow layout of a table."""
    parts: list[Any] = []
    for first, *rest in blocks:
        parts.append(Text(first, style="bold"))
        parts += [Padding(Text(line), (0, 0, 0, 2)) for line in rest]
        parts.append(Text(""))
    return Group(*parts)


def task_table(rows: list[dict[str, Any]]) -> Group:
    table = Table()
    for column in ("name", "description", "alphabet", "lengths", "level", "coupled"):
        table.add_column(column, overflow="fold")
    for r in rows:
        lengths = f"{r['min_len']}-{r['max_len']}"
        coupled = "yes" if r["aligned"] else "-"
        level = r["level"] or "-"
        table.add_row(r["name"], r["description"], r["alphabet"], lengths, level, coupled)
    narrow = lines(
        [
            [
                r["name"],
                r["description"],
                f"alphabet {r['alphabet']}, lengths {r['min_len']}-{r['max_len']}, "
                f"level: {r['level'] or '-'}, coupled: {'yes' if r['aligned'] else '-'}",
            ]
            for r in rows
        ]
    )
    key = (
        "level: the task's place in the Chomsky hierarchy in Delétang et al. (2023), regular,"
        " DCF (deterministic context-free) or CS (context-sensitive); - for jab's own tasks."
        " coupled: whether model.pos_encoding=coupled applies (the task has an alignment)"
    )
    return titled("Built-in tasks", Group(Fitted(table, narrow), Text(key, style="dim")))


def runs_table(rows: list[dict[str, Any]]) -> Group:
    """`jab runs`: one row per run or group of seeds, two lines each so that it fits."""
    table = Table(box=box.SIMPLE_HEAD)
    for column in ("run, created", "task, model", "steps, seeds", "best held-out", "state"):
        table.add_column(column, overflow="fold")
    blocks = []
    for r in rows:
        created = (r["created"] or "-").replace("T", " ")
        if r["task"] is None:  # damaged: nothing else of it could be read
            table.add_row(Text(f"{r['run']}\n{created}"), "-", "-", "-", Text(r["state"]))
            table.add_section()
            blocks.append([r["run"], created, r["state"]])
            continue
        best = r["best_eval_seq_acc"]
        if isinstance(best, list):  # a group: each seed's best
            known = [b for b in best if b is not None]
            best = spread(known) if known else None
        elif best is not None:
            best = percent(best)
        params = model_form(r.get("arch"))
        params += f", {r['parameters'] / 1000:.0f}k params" if r["parameters"] else ""
        if r.get("flops_per_step"):
            params += f", {r['flops_per_step'] / 1e9:.2g} GFLOP/step"
        seeds = plural(r["seeds"], "seed")
        table.add_row(
            Text(f"{r['run']}\n{created}"),
            Text(f"{r['task']}\n{r['pos_encoding']}{params}"),
            Text(f"{r['step']}/{r['steps']}\n{seeds}"),
            Text(best or "-"),
            Text(f"{r['state']}\n{r['train_s']:.0f} s training"),
        )
        table.add_section()
        blocks.append(
            [
                r["run"],
                created,
                f"{r['task']}, {r['pos_encoding']}{params}",
                f"step {r['step']}/{r['steps']}, {seeds}, best held-out {best or '-'}",
                f"{r['state']}, {r['train_s']:.0f} s training",
            ]
        )
    return titled("Runs, newest first", Fitted(table, lines(blocks)))


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
        self.metrics: list[dict[str, Any]] = []  # the latest record of each seed
        self.eval: list[dict[str, Any]] = []  # the latest evaluation of each seed
        self.live: Live | None = None
        self.target = 1.0

    def note(self, message: str) -> None:
        say(message)

    def begin(self, path, experiment, start_step: int, parameters: int, flops=None) -> None:
        cfg = experiment.config
        self.target = cfg.train.target_seq_acc
        say(training_header(experiment, path, parameters, flops))
        self.bar = self.progress.add_task(
            cfg.task.name, total=cfg.train.steps, completed=start_step, speed="", ended=""
        )
        self.live = live(self.render())
        self.live.__enter__()

    def end(self) -> None:
        if self.live is not None:
            self.live.update(self.render())
            self.live.__exit__(None, None, None)
            self.live = None
            if not console.is_terminal:  # Live ends a terminal's last line, not a file's
                console.line()

    def render(self) -> Group:
        m, ev = self.metrics, self.eval
        table = Table(box=box.SIMPLE_HEAD, header_style="bold")
        table.add_column("", style="bold", overflow="fold")
        table.add_column("training batch", justify="right", overflow="fold")
        table.add_column("held-out", justify="right", overflow="fold")
        table.add_row("step", cell(m[:1], "step", str), cell(ev[:1], "step", str))
        table.add_row("loss", cell(m, "loss", "{:.4f}".format))
        table.add_row("token acc", cell(m, "token_acc", percent), cell(ev, "token_acc", percent))
        table.add_row("exact match", cell(m, "seq_acc", percent), cell(ev, "seq_acc", percent))
        table.add_row("learning rate", cell(m[:1], "lr", "{:.2e}".format))
        parts: list[Any] = [self.progress, table]
        if len(ev) > 1:
            reached = sum(at_target(e["seq_acc"], self.target) for e in ev)
            parts.append(
                Text(
                    f"{reached} of {len(ev)} seeds at the target {percent(self.target)}; "
                    "figures are median [min-max] over seeds"
                )
            )
        return Group(*parts)

    def log(self, records: list[dict[str, Any]]) -> None:
        self.metrics = records
        first = records[0]
        # The condition the Trainer stops on: this is the last record of the run.
        reached = all(at_target(r.get("eval_seq_acc"), self.target) for r in records)
        self.progress.update(
            self.bar,
            completed=first["step"],
            speed=f"{first['steps_per_sec']:.0f} steps/s",
            ended="target reached" if reached else "",
        )
        if reached:
            self.progress.stop_task(self.bar)
        self.live.update(self.render())

    def evaluated(self, results: list[dict[str, Any]]) -> None:
        self.eval = results
        first = results[0]
        seeds = f", median [min-max] of {len(results)} seeds" if len(results) > 1 else ""
        console.print(
            f"step {first['step']:>6}  held-out: token acc "
            f"{spread([r['token_acc'] for r in results])}, exact match "
            f"{spread([r['seq_acc'] for r in results])} "
            f"({plural(first['samples'], 'sample')}{seeds})",
            markup=False,
        )


def cell(records: list[dict[str, Any]], key: str, show) -> Text | str:
    """A figure of the latest records (one per seed), or '-' before there is one."""
    if not records or key not in records[0]:
        return "-"
    return Text(spread([r[key] for r in records], show))


def examples_table(
    examples: list[dict[str, Any]], limit: int = 8, title: str = "Held-out predictions"
) -> Group:
    """A few predictions, mistakes first."""
    ordered = sorted(examples, key=lambda e: e["correct"])[:limit]
    table = Table(box=box.SIMPLE_HEAD)
    for column in ("input", "output", "expected"):
        table.add_column(column, overflow="fold")
    table.add_column("", justify="center", no_wrap=True)
    for e in ordered:
        table.add_row(e["input"], answer(e["output"]), answer(e["expected"]), verdict(e["correct"]))
    return titled(title, table)


def verdict(correct: bool | None) -> Text:
    if correct is None:
        return Text("? no reference", style="dim")
    return Text("✓ right", style="green") if correct else Text("✗ wrong", style="red")


def summary(outcome: Outcome) -> Group:
    evals = outcome.last_eval
    rows = [("run", str(outcome.path))]
    if len(outcome.runs) > 1:
        rows.append(("seeds", f"{len(outcome.runs)}; figures are median [min-max] over seeds"))
    rows += [("steps", str(outcome.step)), ("wall time", f"{outcome.elapsed_s:.1f} s")]
    if evals:
        if len(evals) > 1:
            reached = f"reached by {outcome.reached} of {len(evals)} seeds"
        else:
            reached = "reached" if outcome.reached_target else "not reached"
        rows += [
            ("held-out token acc", spread([e["token_acc"] for e in evals])),
            ("held-out exact match", spread([e["seq_acc"] for e in evals])),
            ("target", f"{percent(outcome.target_seq_acc)} {reached}"),
        ]
    parts: list[Any] = [titled("Run summary", facts(rows))]
    if evals:
        title = "Held-out predictions" + (" of the first seed" if len(evals) > 1 else "")
        parts.append(examples_table(evals[0]["examples"], title=title))
    return Group(*parts)


def commands(intro: str, lines: list[str]) -> None:
    """Commands to type next, each whole on a line of its own (never wrapped inside)."""
    say(intro)
    for line in lines:
        console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)


def eval_report(result: dict[str, Any], run_path: str, train_range: tuple[int, int]) -> Group:
    rows = [
        ("run", run_path),
        ("task", f"{result['task']}, {result['pos_encoding']} positions"),
        ("checkpoint", f"step {result['step']}"),
        ("samples", str(result["samples"])),
        ("token accuracy", figure(result, "token_acc")),
        ("exact match", figure(result, "seq_acc")),
    ]
    if "forced_seq_acc" in result:
        rows.append(("at the true length", figure(result, "forced_seq_acc")))
    seeds = result.get("seeds", [])
    if seeds:
        rows[1:1] = [("seeds", f"{len(seeds)}; figures are median [min-max] over seeds")]
        rows += [
            (
                f"  {Path(one['run']).name}",
                f"exact match {percent(one['seq_acc'])} (step {one['step']})",
            )
            for one in seeds
        ]
        if len({one["step"] for one in seeds}) > 1:
            rows[3] = ("checkpoint", f"steps differ by seed (earliest {result['step']})")
    head = facts(rows)
    parts: list[Any] = [titled("Evaluation", head), length_table(result["per_length"], train_range)]
    if result.get("missing_lengths"):
        missing = ", ".join(map(str, result["missing_lengths"]))
        parts.append(Text(f"No held-out pairs at lengths {missing}.", style="yellow"))
    if len(result["per_length"]) > 1:
        parts.append(LengthChart(result["per_length"], train_range))
    shown = False
    for one in seeds or [result]:  # a group: each seed's own mistakes, labelled
        mistakes = [e for e in one["examples"] if not e["correct"]]
        if mistakes:
            title = "Some mistakes" + (f" of {Path(one['run']).name}" if seeds else "")
            parts.append(examples_table(mistakes, limit=5, title=title))
            shown = True
    if not shown:
        parts.append(Text("No mistakes.", style="green"))
    return Group(*parts)


def in_range(length: int, train_range: tuple[int, int]) -> bool:
    return train_range[0] <= length <= train_range[1]


@dataclass
class Bar:
    """An accuracy as a bar, `BAR_WIDTH` long at 100% or as long as the room its column
    is given: it shrinks with the terminal rather than being cut."""

    value: float
    trained: bool

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(1, min(BAR_WIDTH, options.max_width))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = min(BAR_WIDTH, options.max_width)
        yield Text(
            ("█" if self.trained else "▒") * round(width * self.value),
            style="green" if self.trained else "yellow",
        )


def length_table(per_length: dict[int, dict[str, Any]], train_range: tuple[int, int]) -> Group:
    """Accuracy at each input length with a bar per row; lengths beyond training have
    bars of another shade (read without colour too)."""
    low, high = train_range
    forced = all("forced_seq_acc" in row for row in per_length.values())
    table = Table(box=box.SIMPLE_HEAD)
    columns = ["length", "samples", "token acc", "exact match"]
    for column in columns + (["at true length"] if forced else []):
        table.add_column(column, justify="right", no_wrap=True)  # else Fitted goes narrow
    table.add_column("")
    narrow = []
    for length, row in sorted(per_length.items()):
        table.add_row(
            str(length),
            str(row["samples"]),
            figure(row, "token_acc"),
            figure(row, "seq_acc"),
            *([figure(row, "forced_seq_acc")] if forced else []),
            Bar(row["seq_acc"], in_range(length, train_range)),
        )
        at_length = f", at the true length {figure(row, 'forced_seq_acc')}" if forced else ""
        narrow.append(
            Text(
                f"length {length}{'' if in_range(length, train_range) else ' (beyond)'}: "
                f"exact match {figure(row, 'seq_acc')}{at_length}, token acc "
                f"{figure(row, 'token_acc')}, {plural(row['samples'], 'sample')}"
            )
        )
    parts: list[Any] = [Fitted(table, Group(*narrow))]
    if any(not in_range(n, train_range) for n in per_length):
        key = Text("  ")
        key.append("█ trained on", style="green")
        key.append(f" lengths {low}-{high}   ")
        key.append("▒ beyond training", style="yellow")
        parts.append(key)
    return titled(f"By input length (trained on {low}-{high})", Group(*parts))


def round_ticks(low: int, high: int, most: int) -> list[int]:
    """Whole numbers from `low` to `high` for an axis's labels, at most `most` of them, a
    round step apart (1, 2 or 5 times a power of ten): 100 200 300, not 41 65 89 113."""
    step = 1
    while True:
        for size in (step, 2 * step, 5 * step):
            ticks = list(range(-(-low // size) * size, high + 1, size))
            if len(ticks) <= most:
                return ticks
        step *= 10


EIGHTHS = " ▁▂▃▄▅▆▇█"
CHART_MARGIN = "     "


@dataclass
class LengthChart:
    """A column per length, as tall as its exact match; lengths trained on are green.

    At most `columns` columns, and no wider than the terminal: past that, each column is
    the mean of a few neighbouring lengths.
    """

    per_length: dict[int, dict[str, Any]]
    train_range: tuple[int, int]
    title: str = "Exact match by input length"
    height: int = 8
    columns: int = 64

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        per_length, train_range = self.per_length, self.train_range
        columns = max(1, min(self.columns, options.max_width - len(CHART_MARGIN)))
        lengths = sorted(per_length)
        per_column = -(-len(lengths) // columns)
        groups = [lengths[i : i + per_column] for i in range(0, len(lengths), per_column)]
        width = max(1, min(3, columns // len(groups)))  # characters per column
        heights = [sum(per_length[n]["seq_acc"] for n in g) / len(g) for g in groups]
        trained = [in_range(g[0], train_range) for g in groups]
        yield Text(self.title, style="bold")
        for level in range(self.height, 0, -1):
            row = Text("100% " if level == self.height else CHART_MARGIN, style="dim")
            for value, inside in zip(heights, trained):
                eighths = round(8 * self.height * value) - 8 * (level - 1)
                cell = EIGHTHS[max(0, min(8, eighths))] * width
                row.append(cell, style="green" if inside else "yellow")
            yield row
        axis = Text("  0% ", style="dim")
        for inside in trained:
            axis.append(("━" if inside else "─") * width, style="green" if inside else "yellow")
        ticks = [" "] * (width * len(groups))
        most = max(2, len(ticks) // (len(str(lengths[-1])) + 3))  # a label, and room
        for length in round_ticks(lengths[0], lengths[-1], most):
            at = next((i * width for i, g in enumerate(groups) if g[0] <= length <= g[-1]), None)
            label = str(length)
            if at is None or at + len(label) > len(ticks):
                continue
            if set(ticks[max(0, at - 1) : at + len(label) + 1]) == {" "}:
                ticks[at : at + len(label)] = list(label)
        yield axis
        yield Text(CHART_MARGIN + "".join(ticks), style="dim")
        low, high = train_range
        legend = Text(CHART_MARGIN)
        legend.append("━━ trained on", style="green")
        legend.append(f" lengths {low}-{high}   ")
        legend.append("── beyond training", style="yellow")
        if per_column > 1:
            legend.append(f"   (each column: mean of {per_column} lengths)", style="dim")
        yield legend


def comparison(results: list[dict[str, Any]]) -> Group:
    """Several runs' exact match side by side, one row per length, then each run's chart."""
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("length", justify="right", no_wrap=True)
    names = run_labels([r["run"] for r in results])
    for r, name in zip(results, names):
        low, high = r["train_lengths"]
        seeds = f", {len(r['seeds'])} seeds" if "seeds" in r else ""
        table.add_column(
            f"{name}\n{r['task']}, {r['pos_encoding']}, {low}-{high}{seeds}",
            justify="right",
            overflow="fold",
        )
    lengths = sorted({n for r in results for n in r["per_length"]})
    for length in lengths:
        cells = []
        for r in results:
            row = r["per_length"].get(length)
            if row is None:
                cells.append("-")
                continue
            mark = "*" if in_range(length, tuple(r["train_lengths"])) else " "
            cells.append(Text(f"{figure(row, 'seq_acc')}{mark}"))
        table.add_row(str(length), *cells)
    parts: list[Any] = []
    tasks = list(dict.fromkeys(r["task"] for r in results))
    if len(tasks) > 1:
        parts.append(
            Text(
                f"Note: these runs learned different tasks ({', '.join(tasks)}); "
                "each is measured on its own task's inputs.",
                style="yellow",
            )
        )
    title = "Exact match by input length (* = a length the run trained on)"
    if any("seeds" in r for r in results):
        title += "; a group of seeds: median [min-max], charted by its median"
    parts.append(titled(title, table))
    parts += [
        LengthChart(r["per_length"], tuple(r["train_lengths"]), title=name)
        for r, name in zip(results, names)
    ]
    return Group(*parts)


def predictions(rows: list[dict[str, Any]]) -> Table:
    table = Table(box=box.SIMPLE_HEAD)
    for column in ("input", "prediction", "reference"):
        table.add_column(column, overflow="fold")
    table.add_column("", no_wrap=True)
    for r in rows:
        reference = "-" if r["expected"] is None else answer(r["expected"])
        table.add_row(r["input"], answer(r["output"]), reference, verdict(r["correct"]))
    return table


def answer(text: str) -> Text:
    """An answer as a table shows it: an empty one (an empty stack) says so."""
    return Text(text) if text else Text("(empty)", style="dim")


def heatmap(weights: np.ndarray, rows: list[str], cols: list[str], title: str) -> Panel:
    """One attention matrix [queries, keys] as a shaded grid, queries down, keys across."""
    grid = Table(box=None, show_header=True, padding=(0, 0), header_style="bold")
    grid.add_column("", justify="right", no_wrap=True)
    for c in cols:
        grid.add_column(label(c, narrow=True), justify="center", width=2, no_wrap=True)
    for r, row in zip(rows, weights):
        cells = [shade(float(w)) for w in row]
        grid.add_row(label(r) + " ", *cells)
    return Panel(grid, title=title, expand=False, border_style="dim")


def shade(weight: float) -> Text:
    level = min(len(SHADES) - 1, round(weight * (len(SHADES) - 1)))
    return Text(
        SHADES[level] * 2, style=f"rgb({40 + int(215 * weight)},{60 + int(120 * weight)},90)"
    )


def legend() -> Text:
    text = Text("weight: ")
    for i in range(len(SHADES)):
        low = i / (len(SHADES) - 1)
        text.append_text(shade(low))
        text.append(f" {low:.2f}  ")
    return text


def label(token: str, narrow: bool = False) -> str:
    """A token as a heatmap labels it; `narrow`: in two characters, an index hint [k]
    by the last two digits of k."""
    if narrow and is_hint_token(token):
        return token[1:-1][-2:]
    return {"<pad>": "·", "<bos>": "^", "<eos>": "$"}.get(token, token)


@dataclass
class AttentionView:
    """The heatmaps of one layer under a title line, with their legend."""

    title: str
    panels: list[Panel]
    tokens: list[str]  # the labels of rows and columns
    command = "show-attention"

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text(self.title, style="bold")
        yield Columns(self.panels, padding=(0, 1))
        yield legend()
        hints = any(is_hint_token(token) for token in self.tokens)
        slots = any(token.startswith("□") for token in self.tokens)  # inspection.SLOT_LABEL
        yield Text(
            "rows: queries, columns: keys; ^ = <bos>, $ = <eos>"
            + ("; □ = an answer slot (□→x: it wrote x)" if slots else "")
            + ("; index hint [k] heads a column as k's last two digits" if hints else ""),
            style="dim",
        )

    def width(self, console: Console) -> int:
        """The terminal width it needs: the widest heatmap, whole (one squeezed into fewer
        columns would drop cells)."""
        unlimited = console.options.update(max_width=1_000_000)
        return max(Measurement.get(console, unlimited, p).maximum for p in self.panels)


def attention_view(attention: Any, head: str | None, run_path: str) -> AttentionView:
    """The heatmaps of one layer's attention (api.Attention): every head side by side,
    one head, or their mean."""
    weights, rows, cols = attention.weights, attention.rows, attention.cols
    if head is None:
        panels = [heatmap(weights[h], rows, cols, f"head {h}") for h in range(len(weights))]
    elif head == "mean":
        panels = [heatmap(weights.mean(0), rows, cols, "mean of heads")]
    else:
        index = int(head) % len(weights)  # -1 is the last, as in Python
        panels = [heatmap(weights[index], rows, cols, f"head {index}")]
    title = (
        f"{attention.kind} attention, layer {attention.layer} of {run_path}: "
        f"input {attention.input} -> output {attention.answer} ({attention.verdict})"
    )
    return AttentionView(title, panels, [*rows, *cols])


def show_picture(view: AttentionView | CurvesView) -> None:
    """Print `view` as wide as the terminal, or as wide as its widest heatmap if wider."""
    width = view.width(console)
    if width <= console.width:
        console.print(view)
        return
    wide = Console(
        width=width,
        color_system=console.color_system,
        force_terminal=console.is_terminal,
        no_color=console.no_color,
    )
    wide.print(view)


CURVE_COLORS = ("blue", "red", "green", "magenta", "cyan", "orange")
CURVE_MARKERS = ("●", "+", "x", "o", "*", "#", "@", "%", "&", "$")  # when there is no colour


@dataclass
class CurvesView:
    """A plot (plots.Plot) drawn in the terminal with plotext: one curve per run, a group
    of seeds as its median, with its min and max dotted in the same colour."""

    plot: Plot
    height: int = 16
    command = "curves"
    legend_below = 60  # narrower than this, the legend would cover the plot: under it

    @property
    def curves(self) -> list[Any]:
        return self.plot.curves

    @property
    def title(self) -> str:
        return self.plot.heading

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text(self.title, style="bold")
        colours = not console.no_color and console.color_system is not None
        yield Text.from_ansi(self.draw(options.max_width, colours))
        if options.max_width < self.legend_below:
            key = Text()
            for curve, color, marker in zip(self.curves, *self.looks(colours)):
                key.append(("━━" if colours else marker * 2) + f" {curve.name}", style=color)
                key.append("  ")
            yield key

    def looks(self, colours: bool) -> tuple[list[str], list[str]]:
        """Each curve's colour, and its marker: without colours, a character of its own."""
        colors = list(CURVE_COLORS * len(self.curves))
        markers = CURVE_MARKERS * len(self.curves) if not colours else ["hd"] * len(self.curves)
        return colors, list(markers)

    def width(self, console: Console) -> int:
        return console.width

    def draw(self, width: int, colours: bool = True) -> str:
        """The plot as plotext draws it; without colours, each curve has a marker of its
        own, so that the legend still tells them apart."""
        import plotext as plt

        plt.clear_figure()
        plt.plotsize(max(30, width), self.height)
        plt.theme("clear")
        percent = self.curves[0].metric.endswith("acc")
        scale = 100.0 if percent else 1.0
        colors, markers = self.looks(colours)
        for curve, color in zip(self.curves, colors):  # bands first, under every median
            for band in (curve.low, curve.high):
                if band is not None:
                    plt.plot(curve.steps, [scale * v for v in band], color=color, marker="dot")
        legend = width >= self.legend_below  # else under the plot (__rich_console__)
        for curve, color, marker in zip(self.curves, colors, markers):
            values = [scale * v for v in curve.values]
            label = curve.name if legend else None
            plt.plot(curve.steps, values, label=label, color=color, marker=marker)
        if self.curves[0].metric in ("loss", "grad_norm", "lr") and all(
            v > 0 for c in self.curves for v in c.values
        ):
            plt.yscale("log")
        if percent:
            plt.ylim(0, 100)
        xs = [x for curve in self.curves for x in curve.steps]
        if xs:  # steps and lengths are whole numbers: so are their ticks, round ones
            ticks = round_ticks(int(min(xs)), int(max(xs)), max(2, min(8, width // 12)))
            plt.xticks(ticks, [str(t) for t in ticks])
        shade = self.plot.shade
        if shade is not None:
            for x in shade:
                plt.vline(x, "gray")
        trained = f"   (trained on {shade[0]}-{shade[1]})" if shade else ""
        plt.xlabel(self.plot.x_label + ("   (y: %)" if percent else "") + trained)
        return plt.build()


def recorded(view: AttentionView | CurvesView) -> Console:
    """A console that has printed `view` as the terminal would, for export."""
    width = max(console.width, view.width(console))
    recorder = Console(record=True, file=io.StringIO(), width=width, force_jupyter=False)
    recorder.print(view)
    return recorder


def picture_svg(view: AttentionView | CurvesView) -> str:
    """`view` as a self-contained SVG picture of the terminal drawing."""
    return recorded(view).export_svg(title=f"jab {view.command}", code_format=SVG_FORMAT)


def save_picture(view: AttentionView | CurvesView, path: Path) -> None:
    """Write `view` to a self-contained .svg or .html file, laid out as in the terminal."""
    if path.suffix.lower() == ".svg":
        picture = picture_svg(view)
    else:
        page = HTML_FORMAT.replace("{title}", html.escape(view.title).translate(BRACES))
        picture = recorded(view).export_html(inline_styles=True, code_format=page)
    atomic_write(path, picture.encode())


BRACES = str.maketrans({"{": "{{", "}": "}}"})

# Rich's SVG template without its web fonts (fetched from a CDN): the picture names
# local monospace fonts, so it needs nothing but the file. Rich fills in the fields.
SVG_FORMAT = """\
<svg class="rich-terminal" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">
    <style>
    .{unique_id}-matrix {{
        font-family: Menlo, "DejaVu Sans Mono", Consolas, "Liberation Mono", monospace;
        font-size: {char_height}px;
        line-height: {line_height}px;
        font-variant-east-asian: full-width;
    }}
    .{unique_id}-title {{
        font-size: 18px;
        font-weight: bold;
        font-family: sans-serif;
    }}
    {styles}
    </style>
    <defs>
    <clipPath id="{unique_id}-clip-terminal">
      <rect x="0" y="0" width="{terminal_width}" height="{terminal_height}" />
    </clipPath>
    {lines}
    </defs>
    {chrome}
    <g transform="translate({terminal_x}, {terminal_y})"
       clip-path="url(#{unique_id}-clip-terminal)">
    {backgrounds}
    <g class="{unique_id}-matrix">
    {matrix}
    </g>
    </g>
</svg>
"""

# A whole page with inline styles; {title} is filled in first, the rest by Rich.
HTML_FORMAT = """\
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
</head>
<body style="color: {foreground}; background-color: {background}">
<pre style="font-family: Menlo, 'DejaVu Sans Mono', Consolas, 'Liberation Mono', monospace; \
line-height: 1.2"><code style="font-family: inherit">{code}</code></pre>
</body>
</html>
"""


# studies


def study_table(results: dict[str, Any]) -> Group:
    """`jab study show`: one row per cell (its steps and training seconds under its name,
    so that the figures get the width), one column per bin of lengths."""
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("cell", overflow="fold")
    longest = "≥ 50% up to" if results.get("metric", "seq_acc") == "seq_acc" else "exact ≥ 50% to"
    for column in (*results["bins"], longest):
        table.add_column(column, justify="right", no_wrap=True)  # else Fitted goes narrow
    blocks = []
    for cell, (name, (steps, seconds, *figures)) in zip(results["cells"], study_cells(results)):
        trained = f"{steps} steps, {seconds} s" if seconds != "-" else f"{steps} steps"
        *by_bin, longest = figures
        if cell["state"] != "measured":  # its error, under its name: not in a figure's place
            style = "red" if cell["state"].startswith("failed") else "dim"
            table.add_row(
                Text.assemble(f"{name}\n{trained}\n", (cell["state"], style)),
                *map(Text, [*by_bin, "-"]),
            )
            table.add_section()
            blocks.append([name, trained, cell["state"]])
            continue
        table.add_row(Text(f"{name}\n{trained}"), *map(Text, figures))
        table.add_section()
        blocks.append(
            [name, trained]
            + [f"{b}: {f}" for b, f in zip(results["bins"], by_bin)]
            + [f"≥ 50% up to {longest}"]
        )
    return titled(
        f"Study {results['study']} ({results['folder']})",
        Group(Text(study_heading(results), style="dim"), Fitted(table, lines(blocks))),
    )


def study_curves(results: dict[str, Any]) -> CurvesView:
    """A study's exact match against input length, in the terminal."""
    return CurvesView(study_plot(results), height=20)


class StudyView:
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
        self.running: dict[str, dict[str, Any]] = {}
        self.steps: dict[str, int] = {}  # each running cell's step, as last reported
        self.live: Live | None = None

    def begin(self, study, out, todo, workers: str) -> None:
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
        steps = sum(cell.config["train"]["steps"] for cell in todo)
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

    def started(self, cell) -> None:
        self.running[cell.name] = {"step": "starting"}
        self.update()

    def progress_of(self, cell, step: int) -> None:
        before = self.steps.get(cell.name, 0)
        self.progress.advance(self.bar, max(0, step - before))
        self.steps[cell.name] = step

    def event(self, cell, event: dict[str, Any]) -> None:
        row = self.running.setdefault(cell.name, {})
        kind = event.get("event")
        if kind == "begin":
            self.progress_of(cell, event["step"])
            row["step"] = f"{event['step']}/{event['steps']}"
        elif kind == "log":
            self.progress_of(cell, event["step"])
            row["step"] = f"{event['step']}/{cell.config['train']['steps']}"
            row["loss"] = f"{event['loss']:.4f}"
        elif kind == "eval":
            row["held-out"] = percent(event["seq_acc"])
        elif kind == "evaluating":
            row["step"] = "measuring"
        self.update()

    def ended(self, cell, line: Text) -> None:
        self.running.pop(cell.name, None)
        self.progress_of(cell, cell.config["train"]["steps"])
        console.print(line)
        self.update()

    def finished(self, cell, evaluation: dict[str, Any]) -> None:
        from jabcli.studies.studies import bin_name, measured

        self.done += 1
        figures = measured(evaluation, self.bins)["bins"]
        parts = ", ".join(
            f"{bin_name(*b)} {study_figure(figures.get(bin_name(*b)))}" for b in self.bins
        )
        self.ended(cell, Text.assemble(("done ", "green"), (cell.name, "bold"), f": {parts}"))

    def failed(self, cell, error: str) -> None:
        self.ended(cell, Text.assemble(("failed ", "red"), (cell.name, "bold"), f": {error}"))

    def stopped(self, cell) -> None:
        self.running.pop(cell.name, None)
        self.update()

    def end(self) -> None:
        if self.live is not None:
            self.update()
            self.live.__exit__(None, None, None)
            self.live = None
            if not console.is_terminal:
                console.line()
