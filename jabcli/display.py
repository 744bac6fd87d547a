"""Everything jab draws in the terminal with Rich: the live training view, result
tables and attention heatmaps. Shapes and colours still read with NO_COLOR set:
heatmap cells use block characters whose density follows the weight.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from rich import box
from rich.columns import Columns
from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from jabcli.inspection import AttentionMap
from jabcli.runs import atomic_write
from jabcli.session import Observer, Outcome

console = Console()

SHADES = " ░▒▓█"


def percent(x: float) -> str:
    return f"{100 * x:.1f}%"


class TrainView(Observer):
    """Live view of a training run: progress bar, latest metrics, evaluations."""

    def __init__(self) -> None:
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[speed]}"),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
        )
        self.metrics: list[dict[str, Any]] = []  # the latest record of each seed
        self.eval: list[dict[str, Any]] = []
        self.live: Live | None = None

    def note(self, message: str) -> None:
        console.print(message)

    def begin(self, path, experiment, start_step: int) -> None:
        cfg = experiment.config
        seeds = f"{cfg.train.seeds} seeds of " if cfg.train.seeds > 1 else ""
        console.print(
            f"Training {seeds}[bold]{cfg.task.name}[/] (lengths {cfg.task.min_len}-"
            f"{cfg.task.max_len}) into {path} on {jax_devices()}"
        )
        self.target = cfg.train.target_seq_acc
        self.bar = self.progress.add_task(
            cfg.task.name, total=cfg.train.steps, completed=start_step, speed=""
        )
        self.live = Live(self.render(), console=console, refresh_per_second=4, transient=False)
        self.live.__enter__()

    def end(self) -> None:
        if self.live is not None:
            self.live.update(self.render())
            self.live.__exit__(None, None, None)
            self.live = None

    def render(self) -> Group:
        """The latest record; for several seeds, their median, min and max in three rows."""
        table = Table(box=box.SIMPLE, show_header=True, header_style="bold")
        records = self.metrics
        grouped = len(records) > 1
        columns = ["step", "loss", "token acc", "exact match", "held-out exact", "lr", "steps/s"]
        for column in ["seeds"] * grouped + columns:
            table.add_column(column, justify="right")
        if records:
            m = records[0]
            held_out = [e["seq_acc"] for e in self.eval]
            statistics = (("median", np.median), ("min", np.min), ("max", np.max))
            for n, (name, statistic) in enumerate(statistics[: 3 if grouped else 1]):
                table.add_row(
                    *[name] * grouped,
                    str(m["step"]) if n == 0 else "",
                    f"{statistic([r['loss'] for r in records]):.4f}",
                    percent(statistic([r["token_acc"] for r in records])),
                    percent(statistic([r["seq_acc"] for r in records])),
                    percent(statistic(held_out)) if held_out else "-",
                    f"{m['lr']:.2e}" if n == 0 else "",
                    f"{m['steps_per_sec']:.0f}" if n == 0 else "",
                )
        parts: list[Any] = [self.progress, table]
        if len(self.eval) > 1:
            reached = sum(e["seq_acc"] >= self.target for e in self.eval)
            parts.append(
                Text(f"{reached} of {len(self.eval)} seeds at the target {percent(self.target)}")
            )
        return Group(*parts)

    def log(self, records: list[dict[str, Any]]) -> None:
        self.metrics = records
        speed = records[0]["steps_per_sec"]
        self.progress.update(self.bar, completed=records[0]["step"], speed=f"{speed:.0f} steps/s")
        self.live.update(self.render())

    def evaluated(self, results: list[dict[str, Any]]) -> None:
        self.eval = results
        first = results[0]
        seeds = escape(f" (median [min-max] of {len(results)} seeds)") if len(results) > 1 else ""
        console.print(
            f"step {first['step']:>6}  held-out: token acc "
            f"{spread([r['token_acc'] for r in results], percent)}, exact match "
            f"{spread([r['seq_acc'] for r in results], percent)} "
            f"({first['samples']} samples){seeds}"
        )


def spread(values: list[float], fmt=percent) -> str:
    """One value as itself; several as median [min-max]."""
    if len(values) == 1:
        return fmt(values[0])
    return escape(f"{fmt(float(np.median(values)))} [{fmt(min(values))}-{fmt(max(values))}]")


def jax_devices() -> str:
    import jax

    return f"{jax.device_count()} {jax.default_backend()} device(s)"


def examples_table(
    examples: list[dict[str, Any]], limit: int = 8, title: str = "Held-out predictions"
) -> Table:
    """A few predictions, mistakes first."""
    ordered = sorted(examples, key=lambda e: e["correct"])[:limit]
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("input")
    table.add_column("output")
    table.add_column("expected")
    table.add_column("", justify="center")
    for e in ordered:
        table.add_row(e["input"], e["output"], e["expected"], verdict(e["correct"]))
    return table


def verdict(correct: bool | None) -> Text:
    if correct is None:
        return Text("? no reference", style="dim")
    return Text("✓ right", style="green") if correct else Text("✗ wrong", style="red")


def summary(outcome: Outcome) -> Group:
    evals = outcome.last_eval
    table = Table(title="Run summary", box=box.SIMPLE_HEAD, title_justify="left", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("run", str(outcome.path))
    if len(outcome.runs) > 1:
        table.add_row("seeds", escape(f"{len(outcome.runs)} (figures: median [min-max])"))
    table.add_row("steps", str(outcome.step))
    table.add_row("wall time", f"{outcome.elapsed_s:.1f} s")
    if evals:
        table.add_row("held-out token acc", spread([e["token_acc"] for e in evals]))
        table.add_row("held-out exact match", spread([e["seq_acc"] for e in evals]))
        if len(evals) > 1:
            reached = f"reached by {outcome.reached} of {len(evals)} seeds"
        else:
            reached = "reached" if outcome.reached_target else "not reached"
        table.add_row("target", f"{percent(outcome.target_seq_acc)} {reached}")
    parts: list[Any] = [table]
    if evals:
        title = "Held-out predictions" + (" (first seed)" if len(evals) > 1 else "")
        parts.append(examples_table(evals[0]["examples"], title=title))
    return Group(*parts)


def eval_report(result: dict[str, Any], run_path: str, train_range: tuple[int, int]) -> Group:
    head = Table(
        title=f"Evaluation of {run_path}",
        box=box.SIMPLE_HEAD,
        title_justify="left",
        show_header=False,
    )
    head.add_column("what", style="bold")
    head.add_column("value")
    head.add_row("checkpoint", f"step {result['step']}")
    head.add_row("samples", str(result["samples"]))
    head.add_row("token accuracy", percent(result["token_acc"]))
    head.add_row("exact match", percent(result["seq_acc"]))
    parts: list[Any] = [head, length_table(result["per_length"], train_range)]
    if result.get("missing_lengths"):
        missing = ", ".join(map(str, result["missing_lengths"]))
        parts.append(Text(f"No held-out pairs at lengths {missing}.", style="yellow"))
    if len(result["per_length"]) > 1:
        parts.append(length_chart(result["per_length"], train_range))
    mistakes = [e for e in result["examples"] if not e["correct"]]
    if mistakes:
        parts.append(examples_table(mistakes, limit=5, title="Some mistakes"))
    else:
        parts.append(Text("No mistakes.", style="green"))
    return Group(*parts)


def in_range(length: int, train_range: tuple[int, int]) -> bool:
    return train_range[0] <= length <= train_range[1]


def length_table(per_length: dict[int, dict[str, Any]], train_range: tuple[int, int]) -> Table:
    """Accuracy at each input length, with a bar per row; lengths trained on are marked."""
    low, high = train_range
    table = Table(
        title=f"By input length (trained on {low}-{high})",
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    for column in ("length", "samples", "token acc", "exact match", ""):
        table.add_column(column, justify="right" if column else "left")
    for length, row in sorted(per_length.items()):
        trained = in_range(length, train_range)
        bar = Text("█" * round(20 * row["seq_acc"]), style="green" if trained else "yellow")
        bar.append("" if trained else "  beyond training", style="dim")
        table.add_row(
            str(length),
            str(row["samples"]),
            percent(row["token_acc"]),
            percent(row["seq_acc"]),
            bar,
        )
    return table


EIGHTHS = " ▁▂▃▄▅▆▇█"


def length_chart(
    per_length: dict[int, dict[str, Any]],
    train_range: tuple[int, int],
    title: str = "Exact match by input length",
    height: int = 8,
    columns: int = 64,
) -> Group:
    """A column per length, as tall as its exact match; lengths trained on are green.

    Past `columns` lengths, each column is the mean of a few neighbouring lengths.
    """
    lengths = sorted(per_length)
    per_column = -(-len(lengths) // columns)
    groups = [lengths[i : i + per_column] for i in range(0, len(lengths), per_column)]
    width = max(1, min(3, columns // len(groups)))  # characters per column
    heights = [sum(per_length[n]["seq_acc"] for n in g) / len(g) for g in groups]
    trained = [in_range(g[0], train_range) for g in groups]
    margin = "     "
    rows = []
    for level in range(height, 0, -1):
        row = Text("100% " if level == height else margin, style="dim")
        for value, inside in zip(heights, trained):
            eighths = round(8 * height * value) - 8 * (level - 1)
            cell = EIGHTHS[max(0, min(8, eighths))] * width
            row.append(cell, style="green" if inside else "yellow")
        rows.append(row)
    axis = Text("  0% ", style="dim")
    ticks = [" "] * (width * len(groups))
    step = 4 if width > 1 else 8
    for i, (group, inside) in enumerate(zip(groups, trained)):
        axis.append(("━" if inside else "─") * width, style="green" if inside else "yellow")
        label, at = str(group[0]), i * width
        wanted = i in (0, len(groups) - 1) or any(n % step == 0 for n in group)
        room = ticks[max(0, at - 1) : at + len(label) + 1]
        if wanted and at + len(label) <= len(ticks) and set(room) == {" "}:
            ticks[at : at + len(label)] = list(label)
    low, high = train_range
    legend = Text(margin)
    legend.append("━━ trained on", style="green")
    legend.append(f" lengths {low}-{high}   ")
    legend.append("── beyond training", style="yellow")
    if per_column > 1:
        legend.append(f"   (each column: mean of {per_column} lengths)", style="dim")
    return Group(
        Text(title, style="bold"), *rows, axis, Text(margin + "".join(ticks), style="dim"), legend
    )


def comparison(results: list[dict[str, Any]]) -> Group:
    """Several runs' exact match side by side, one row per length, then each run's chart."""
    table = Table(
        title="Exact match by input length (* = a length the run trained on)",
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    table.add_column("length", justify="right")
    for r in results:
        low, high = r["train_lengths"]
        name = Path(r["run"]).name
        table.add_column(f"{name}\n{r['task']}, {r['pos_encoding']}, {low}-{high}", justify="right")
    lengths = sorted({n for r in results for n in r["per_length"]})
    for length in lengths:
        cells = []
        for r in results:
            row = r["per_length"].get(length)
            if row is None:
                cells.append("-")
                continue
            mark = "*" if in_range(length, tuple(r["train_lengths"])) else " "
            cells.append(f"{percent(row['seq_acc'])}{mark}")
        table.add_row(str(length), *cells)
    charts = [
        length_chart(r["per_length"], tuple(r["train_lengths"]), title=Path(r["run"]).name)
        for r in results
    ]
    return Group(table, *charts)


def predictions(rows: list[dict[str, Any]]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, title_justify="left")
    for column in ("input", "prediction", "reference", ""):
        table.add_column(column)
    for r in rows:
        table.add_row(r["input"], r["output"], r["expected"] or "-", verdict(r["correct"]))
    return table


def heatmap(weights: np.ndarray, rows: list[str], cols: list[str], title: str) -> Panel:
    """One attention matrix [queries, keys] as a shaded grid, queries down, keys across."""
    grid = Table(box=None, show_header=True, padding=(0, 0), header_style="bold")
    grid.add_column("", justify="right", no_wrap=True)
    for c in cols:
        grid.add_column(label(c), justify="center", width=2, no_wrap=True)
    for r, row in zip(rows, weights):
        cells = [shade(float(w)) for w in row]
        grid.add_row(label(r) + " ", *cells)
    return Panel(grid, title=title, expand=False, border_style="dim")


def shade(weight: float) -> Text:
    level = min(len(SHADES) - 1, int(round(weight * (len(SHADES) - 1))))
    return Text(
        SHADES[level] * 2, style=f"rgb({40 + int(215 * weight)},{60 + int(120 * weight)},90)"
    )


def legend() -> Text:
    text = Text("weight: ")
    for i in range(len(SHADES)):
        low = i / (len(SHADES) - 1)
        text.append_text(shade(low))
        text.append(f" {low:.2f}  ")
    text.append("  (rows: queries, columns: keys)")
    return text


def label(token: str) -> str:
    return {"<pad>": "·", "<bos>": "^", "<eos>": "$"}.get(token, token)


def attention_view(picture: AttentionMap, layer: int, head: str | None, run_path: str) -> Group:
    """The heatmaps of one layer: every head side by side, one head, or their mean."""
    weights, rows, cols = picture.weights[layer], picture.rows, picture.cols
    if head is None:
        panels = [heatmap(weights[h], rows, cols, f"head {h}") for h in range(len(weights))]
    elif head == "mean":
        panels = [heatmap(weights.mean(0), rows, cols, "mean of heads")]
    else:
        panels = [heatmap(weights[int(head)], rows, cols, f"head {head}")]
    if picture.expected is None:
        verdict = "no reference answer"
    elif picture.answer == picture.expected:
        verdict = "right"
    else:
        verdict = f"wrong, expected {picture.expected}"
    title = (
        f"{picture.kind} attention, layer {layer} of {run_path}: "
        f"input {picture.input} -> output {picture.answer} ({verdict})"
    )
    return Group(
        Text(title, style="bold"),
        Columns(panels, padding=(0, 1)),
        legend(),
        Text("^ = <bos>, $ = <eos>", style="dim"),
    )


def save_picture(view: Group, columns: int, path: Path) -> None:
    """Write `view` to an .svg or .html file, `columns` wide at the least."""
    recorder = Console(record=True, width=max(console.width, columns))
    recorder.print(view)
    if path.suffix.lower() == ".svg":
        picture = recorder.export_svg(title="jab show-attention")
    else:
        picture = recorder.export_html()
    atomic_write(path, picture.encode())
