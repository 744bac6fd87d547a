"""Pictures in the terminal and in files: attention heatmaps in block characters whose
density follows the weight, curves drawn with plotext, and either saved as a
self-contained SVG or HTML file laid out as in the terminal."""

from __future__ import annotations

import html
import io
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.columns import Columns
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from jabcli.api.plots import Plot, study_plot
from jabcli.cli.display import console, round_ticks
from jabcli.core.runtime import Lazy
from jabcli.core.tokenizer import is_hint_token
from jabcli.runs.runs import atomic_write

if TYPE_CHECKING:
    import numpy as np
else:
    np = Lazy("numpy")  # for heatmaps only: `jab tasks` need not import it

SHADES = " ░▒▓█"


def heatmap(weights: np.ndarray, rows: list[str], cols: list[str], title: str) -> Panel:
    """One attention matrix [queries, keys] as a shaded grid, queries down, keys across."""
    grid = Table(box=None, show_header=True, padding=(0, 0), header_style="bold")
    grid.add_column("", justify="right", no_wrap=True)
    # A column two characters wide: labels of two (10, 11) would run together ("1011"),
    # so where there are any, every label is written downwards, ones under tens.
    heads = [label(c, narrow=True) for c in cols]
    tall = max(map(len, heads), default=1)
    for head in heads:
        grid.add_column("\n".join(head.rjust(tall)), justify="center", width=2, no_wrap=True)
    for r, row in zip(rows, weights):
        cells = [shade(float(w)) for w in row]
        grid.add_row(label(r) + " ", *cells)
    return Panel(grid, title=title, expand=False, border_style="dim")


def shade(weight: float) -> Text:
    level = min(len(SHADES) - 1, round(weight * (len(SHADES) - 1)))
    return Text(
        SHADES[level] * 2, style=f"rgb({40 + int(215 * weight)},{60 + int(120 * weight)},90)"
    )


def legend(name: str = "weight") -> Text:
    text = Text(f"{name}: ")
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
    # What a cell shows, and what rows and columns are (attention's, or a memory's).
    shown: str = "weight"
    axes: str = "rows: queries, columns: keys"
    command = "show-attention"

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text(self.title, style="bold")
        yield Columns(self.panels, padding=(0, 1))
        yield legend(self.shown)
        hints = any(is_hint_token(token) for token in self.tokens)
        slots = any(token.startswith("□") for token in self.tokens)  # inspection.SLOT_LABEL
        yield Text(
            f"{self.axes}; ^ = <bos>, $ = <eos>"
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
    one head, or their mean; or a recurrent form's memory, one heatmap."""
    weights, rows, cols = attention.weights, attention.rows, attention.cols
    if attention.memory:
        title = (
            f"{attention.kind} of {run_path}: input {attention.input} -> output "
            f"{attention.answer} ({attention.verdict})"
        )
        panels = [heatmap(weights[0], rows, cols, "each cell's size after each step")]
        axes = (
            f"rows: the token read at each step, columns: {attention.memory} (last two "
            "digits, tens over ones)"
        )
        return AttentionView(title, panels, [*rows, *cols], "size, largest 1", axes)
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
        # Rich's color_system property says str; it is one of the names Console takes.
        color_system=console.color_system,  # type: ignore[arg-type]
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
        if not self.legend_inside(options.max_width):
            key = Text()
            for curve, color, marker in zip(self.curves, *self.looks(colours)):
                key.append(("━━" if colours else marker * 2) + f" {curve.name}", style=color)
                key.append("  ")
            yield key

    def legend_inside(self, width: int) -> bool:
        """Whether the legend fits inside the plot: wide enough not to cover it, and a
        line for each curve (plotext leaves out a legend taller than the plot)."""
        return width >= self.legend_below and len(self.curves) <= self.height - 6

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
        legend = self.legend_inside(width)  # else under the plot (__rich_console__)
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


def study_curves(results: Mapping[str, Any]) -> CurvesView:
    """A study's exact match against input length, in the terminal."""
    return CurvesView(study_plot(results), height=20)
