"""Pictures for files and notebooks, drawn by matplotlib (the optional extra
`plots`: `pip install matplotlib`): learning curves, a study's exact match by length, a
comparison of runs by length. Vector SVG or PNG, proper axes, a marker at every step
actually measured, a legend, and a group of seeds as its median with its min-max band.
The terminal draws its own pictures (cli/pictures.py); these never need a terminal.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from jabcli.api.formatting import metric_name, model_words, run_labels
from jabcli.core.errors import JabError, install

if TYPE_CHECKING:
    from collections.abc import Sequence

    from matplotlib.typing import RcKeyType

    from jabcli.inspection.inspection import Evaluated

FORMATS = ("svg", "png")
INSTALL = install("plots")


class MissingExtra(JabError):
    """The optional extra `plots` (matplotlib) is needed and not installed."""


@dataclass
class Plot:
    """Curves of one metric, one per run (inspection.Curve), against steps or lengths."""

    curves: list[Any]
    x_label: str = "step"
    title: str = ""  # default: the metric's name, by step
    shade: tuple[int, int] | None = None  # a range of x to mark: the training lengths

    @property
    def metric(self) -> str:
        return self.curves[0].metric

    @property
    def heading(self) -> str:
        return self.title or f"{metric_name(self.metric)} by {self.x_label}"


def available() -> bool:
    """Whether matplotlib (the plots extra) is installed."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def picture(plot: Plot, fmt: str) -> bytes:
    """`plot` as an .svg or .png file's bytes."""
    fig, style = figure(plot, fmt)
    buffer = io.BytesIO()
    with style:
        fig.savefig(buffer, format=fmt, bbox_inches="tight")
    return buffer.getvalue()


def figure(plot: Plot, fmt: str = "svg"):
    """`plot` as a matplotlib Figure, and the style to save it in."""
    try:  # no pyplot: a notebook's own backend and figures are left as they are
        import matplotlib
        from matplotlib.figure import Figure
        from matplotlib.ticker import (
            FuncFormatter,
            LogLocator,
            MaxNLocator,
            NullFormatter,
            PercentFormatter,
        )
    except ImportError:
        raise MissingExtra(f"a {fmt.upper()} picture needs matplotlib: {INSTALL}") from None
    style: dict[RcKeyType, Any] = {
        "figure.facecolor": "white",  # opaque: readable on a light page and a dark one
        "axes.facecolor": "white",
        "axes.spines.top": False,
        "axes.spines.right": False,
        "svg.fonttype": "none",  # text stays text
        "svg.hashsalt": "jab",  # the same picture gives the same file
    }
    with matplotlib.rc_context(style):
        fig = Figure(figsize=(8, 4.5), dpi=120)
        axes = fig.subplots()
        if plot.shade is not None:
            low, high = plot.shade
            axes.axvspan(low - 0.5, high + 0.5, color="0.92", zorder=0, label="trained on")
        dashes = ("-", "--", ":", "-.")  # past ten curves, colours come round again
        banded = False
        for n, curve in enumerate(plot.curves):
            (line,) = axes.plot(
                curve.steps,
                curve.values,
                dashes[n // 10 % len(dashes)],
                marker="o",
                markersize=3.5 if len(curve.steps) <= 60 else 0,  # each measured point
                linewidth=1.6,
                label=curve.name,
            )
            if curve.low is not None:
                label = None if banded else "shaded: min-max over seeds"
                axes.fill_between(
                    curve.steps, curve.low, curve.high, alpha=0.2, color=line.get_color(), lw=0,
                    label=label,
                )  # fmt: skip
                banded = True
        axes.set_xlabel(plot.x_label)
        axes.set_ylabel(metric_name(plot.metric))
        axes.set_title(plot.heading, loc="left", fontsize="medium")
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        if plot.metric.endswith("acc"):
            axes.set_ylim(-0.02, 1.02)
            axes.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
        elif plot.metric in ("loss", "grad_norm") and all(
            v > 0 for c in plot.curves for v in c.values
        ):
            axes.set_yscale("log")
            values = [v for c in plot.curves for v in (*c.values, *(c.low or ()), *(c.high or ()))]
            if max(values) < 100 * min(values):  # within two decades: 0.6 and 4, not 6x10^-1
                subs: Literal["all"] | tuple[float, ...] = (
                    "all" if max(values) < 10 * min(values) else (1.0, 2.0, 5.0)
                )
                axes.yaxis.set_major_locator(LogLocator(subs=subs))
                axes.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
                axes.yaxis.set_minor_formatter(NullFormatter())
        axes.grid(alpha=0.3)
        if len(plot.curves) > 4:  # beside the plot, not over it
            axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
        else:
            axes.legend(fontsize="small")
    return fig, matplotlib.rc_context(style)


def save(plot: Plot, path) -> None:
    """Write `plot` to `path`, an .svg or .png file."""
    from jabcli.runs.runs import atomic_write

    atomic_write(path, picture(plot, path.suffix.lower().lstrip(".")))


def study_plot(results: Mapping[str, Any]) -> Plot:
    """A study's exact match against input length (`jab study show`): a line per
    measured cell with its seeds' band, the training lengths marked."""
    from jabcli.inspection.curves import Curve

    curves, ranges = [], set()
    for c in results["cells"]:
        if c["state"] != "measured":
            continue
        ranges.add(tuple(c["train_lengths"]))
        lengths = sorted(c["per_length"], key=int)
        spreads = [c["per_length"][n] for n in lengths]
        several = c["seeds"] > 1
        curves.append(
            Curve(
                c["name"],
                "eval_seq_acc",
                [int(n) for n in lengths],
                [s["median"] for s in spreads],
                [s["min"] for s in spreads] if several else None,
                [s["max"] for s in spreads] if several else None,
            )
        )
    if not curves:
        raise JabError(f"no cell of {results['folder']} is measured yet: nothing to draw")
    return Plot(
        curves,
        x_label="input length",
        title=f"Study {results['study']}: held-out exact match by input length",
        shade=ranges.pop() if len(ranges) == 1 else None,  # cells trained alike, or none
    )


def comparison_plot(results: Sequence[Evaluated]) -> Plot:
    """`jab compare`'s runs: held-out exact match against input length, a line per run
    (a group of seeds: its median, with its min-max band), the training lengths marked
    when the runs share them."""
    from jabcli.inspection.curves import Curve

    curves = []
    for label, r in zip(run_labels([r["run"] for r in results]), results):
        lengths = sorted(r["per_length"], key=int)
        rows = [r["per_length"][n] for n in lengths]
        banded = all("seq_acc_range" in row for row in rows)
        curves.append(
            Curve(
                f"{label} ({model_words(r['pos_encoding'], r['arch'])})",
                "eval_seq_acc",
                [int(n) for n in lengths],
                [row["seq_acc"] for row in rows],
                [row["seq_acc_range"][0] for row in rows] if banded else None,
                [row["seq_acc_range"][1] for row in rows] if banded else None,
            )
        )
    trained = {(r["train_lengths"][0], r["train_lengths"][1]) for r in results}
    return Plot(
        curves,
        x_label="input length",
        title="held-out exact match by input length",
        shade=trained.pop() if len(trained) == 1 else None,
    )
