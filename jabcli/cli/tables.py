"""Results as Rich tables: the built-in tasks, the runs, a run's summary, an evaluation
with its accuracy by length (bars and a chart), a comparison, predictions and a study's
table by length bins."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from jabcli.api.formatting import (
    figure,
    model_words,
    percent,
    plural,
    run_labels,
    spread,
    study_cells,
    study_heading,
)
from jabcli.cli.display import Fitted, facts, lines, round_ticks, titled
from jabcli.training.session import Outcome

if TYPE_CHECKING:
    from jabcli.evaluation.figures import Example, Figures
    from jabcli.inspection.inspection import Evaluated, Prediction
    from jabcli.inspection.listing import RunRow
    from jabcli.studies.study_results import StudyTable

BAR_WIDTH = 20  # the longest bar of an accuracy, in characters


class TaskRow(TypedDict):
    """A built-in task as `jab tasks` lists it (and `--json` prints it)."""

    name: str
    description: str
    alphabet: str
    min_len: int
    max_len: int
    aligned: bool  # model.pos_encoding=coupled applies
    level: str | None  # regular, DCF or CS; None: jab's own


def task_table(rows: list[TaskRow]) -> Group:
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


def runs_table(rows: list[RunRow]) -> Group:
    """`jab runs`: one row per run or group of seeds, two lines each so that it fits."""
    table = Table(box=box.SIMPLE_HEAD)
    for column in ("run, created", "task, model", "steps, seeds", "best held-out", "state"):
        table.add_column(column, overflow="fold")
    blocks = []
    for r in rows:
        created = (r["created"] or "-").replace("T", " ")
        task, positions, seed_count = r["task"], r["pos_encoding"], r["seeds"]
        if task is None:  # damaged: nothing else of it could be read
            table.add_row(Text(f"{r['run']}\n{created}"), "-", "-", "-", Text(r["state"]))
            table.add_section()
            blocks.append([r["run"], created, r["state"]])
            continue
        assert positions is not None and seed_count is not None  # read with its task
        best = r["best_eval_seq_acc"]
        shown: str | None = None
        if isinstance(best, list):  # a group: each seed's best
            known = [b for b in best if b is not None]
            shown = spread(known) if known else None
        elif best is not None:
            shown = percent(best)
        model = model_words(positions, r["arch"])
        model += f", {r['parameters'] / 1000:.0f}k params" if r["parameters"] else ""
        flops = r.get("flops_per_step")
        if flops:
            model += f", {flops / 1e9:.2g} GFLOP/step"
        seeds = plural(seed_count, "seed")
        table.add_row(
            Text(f"{r['run']}\n{created}"),
            Text(f"{task}\n{model}"),
            Text(f"{r['step']}/{r['steps']}\n{seeds}"),
            Text(shown or "-"),
            Text(f"{r['state']}\n{r['train_s']:.0f} s training"),
        )
        table.add_section()
        blocks.append(
            [
                r["run"],
                created,
                f"{task}, {model}",
                f"step {r['step']}/{r['steps']}, {seeds}, best held-out {shown or '-'}",
                f"{r['state']}, {r['train_s']:.0f} s training",
            ]
        )
    return titled("Runs, newest first", Fitted(table, lines(blocks)))


def examples_table(
    examples: Sequence[Example], limit: int = 8, title: str = "Held-out predictions"
) -> Group:
    """A few predictions, mistakes first."""
    ordered = sorted(examples, key=lambda e: e["correct"])[:limit]
    return titled(title, answers(ordered, ("input", "output", "expected")))


def answers(rows: Sequence[Example] | Sequence[Prediction], heads: tuple[str, str, str]) -> Fitted:
    """Inputs, each with its answer, the reference and a verdict; where even the headers'
    words have no room, three lines an input."""
    table = Table(box=box.SIMPLE_HEAD)
    for column in heads:
        table.add_column(column, overflow="fold")
    table.add_column("", no_wrap=True)
    blocks = []
    for r in rows:
        reference = "-" if r["expected"] is None else answer(r["expected"])
        said = verdict(r["correct"])
        table.add_row(r["input"], answer(r["output"]), reference, said)
        blocks.append(
            [
                f"{heads[0]} {r['input']}",
                f"{heads[1]} {answer(r['output'])} {said}",
                f"{heads[2]} {reference}",
            ]
        )
    return Fitted(table, lines(blocks), folding=True)


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
            ("held-out token acc", spread([e.scores["token_acc"] for e in evals])),
            ("held-out exact match", spread([e.scores["seq_acc"] for e in evals])),
            ("target", f"{percent(outcome.target_seq_acc)} {reached}"),
        ]
    parts: list[Any] = [titled("Run summary", facts(rows))]
    if evals:
        # Mistakes first, so the title says so: 1 wrong of 8 shown is no measure of a run.
        title = "Held-out predictions" + (" of the first seed" if len(evals) > 1 else "")
        title += ", mistakes first"
        parts.append(examples_table(evals[0].scores["examples"], title=title))
    return Group(*parts)


def eval_report(result: Evaluated, run_path: str, train_range: tuple[int, int]) -> Group:
    model = model_words(result["pos_encoding"], result["arch"], " positions")
    rows = [
        ("run", run_path),
        ("task", f"{result['task']}, {model}"),
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


def length_table(per_length: dict[int, Figures], train_range: tuple[int, int]) -> Group:
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


EIGHTHS = " ▁▂▃▄▅▆▇█"

CHART_MARGIN = "     "


@dataclass
class LengthChart:
    """A column per length, as tall as its exact match; lengths trained on are green.

    At most `columns` columns, and no wider than the terminal: past that, each column is
    the mean of a few neighbouring lengths.
    """

    per_length: dict[int, Figures]
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


def comparison(results: Sequence[Evaluated]) -> Group:
    """Several runs' exact match side by side, one row per length, then each run's chart;
    narrower than the table's words, what each run is, then a line per length."""
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("length", justify="right", no_wrap=True)
    names = run_labels([r["run"] for r in results])
    lengths = sorted({n for r in results for n in r["per_length"]})
    columns, blocks = [], []
    for r, name in zip(results, names):
        low, high = r["train_lengths"]
        seeds = f", {len(r['seeds'])} seeds" if "seeds" in r else ""
        about = f"{r['task']}, {model_words(r['pos_encoding'], r['arch'])}, {low}-{high}{seeds}"
        table.add_column(f"{name}\n{about}", justify="right", overflow="fold")
        cells = {}
        for length, row in r["per_length"].items():
            mark = "*" if in_range(length, (low, high)) else " "
            cells[length] = f"{figure(row, 'seq_acc')}{mark}"
        columns.append(cells)
        blocks.append([name, about])
    by_length = []
    for length in lengths:
        table.add_row(str(length), *(Text(cells.get(length, "-")) for cells in columns))
        figures = [f"{name} {c.get(length, '-').strip()}" for name, c in zip(names, columns)]
        by_length.append(Text(f"length {length}: {', '.join(figures)}"))
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
    parts.append(titled(title, Fitted(table, Group(lines(blocks), *by_length))))
    parts += [
        LengthChart(r["per_length"], (r["train_lengths"][0], r["train_lengths"][1]), title=name)
        for r, name in zip(results, names)
    ]
    return Group(*parts)


def predictions(rows: Sequence[Prediction]) -> Fitted:
    return answers(rows, ("input", "prediction", "reference"))


def answer(text: str) -> Text:
    """An answer as a table shows it: an empty one (an empty stack) says so."""
    return Text(text) if text else Text("(empty)", style="dim")


def study_table(results: StudyTable) -> Group:
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
