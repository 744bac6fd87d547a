"""The words and figures jab shows, as plain text: shared by the terminal (cli/live.py,
tables.py), Jupyter (notebook.py) and the pictures (plots.py), so that each reads the same
there. No Rich, no HTML: each caller styles them its own way."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from jabcli.core.settings import short_name
from jabcli.core.spread import Spread
from jabcli.evaluation.figures import RANGES

if TYPE_CHECKING:
    from jabcli.core.spread import SpreadFigure
    from jabcli.evaluation.figures import FigureName, Figures
    from jabcli.studies.study_results import StudyTable

METRIC_NAMES = {
    "loss": "training loss",
    "token_acc": "training token accuracy",
    "seq_acc": "training exact match",
    "eval_token_acc": "held-out token accuracy",
    "eval_seq_acc": "held-out exact match",
    "lr": "learning rate",
    "grad_norm": "gradient norm",
}


def percent(x: float) -> str:
    return f"{100 * x:.1f}%"


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def median_range(median: float, low: float, high: float, show=percent) -> str:
    """A figure over seeds as jab writes it everywhere: median [min-max]."""
    return f"{show(median)} [{show(low)}-{show(high)}]"


def spread(values: list[float], show=percent) -> str:
    """One value as itself; several (one per seed) as their `Spread`: median [min-max]."""
    if len(values) == 1:
        return show(values[0])
    return median_range(*Spread.of(values), show)


def figure(row: Figures, name: FigureName) -> str:
    """An accuracy; of a group of seeds, its median [min-max] (see inspection.combine)."""
    span = row.get(RANGES[name])
    if span is None:
        return percent(row[name])
    return median_range(row[name], *span)


def metric_name(metric: str) -> str:
    return METRIC_NAMES.get(metric, metric)


def run_labels(paths: list[str]) -> list[str]:
    """The shortest trailing part of each run's path that tells them apart:
    runs/a/seed-0 and runs/b/seed-0 are a/seed-0 and b/seed-0."""
    parts = [Path(p).parts for p in paths]
    for n in range(1, max(map(len, parts)) + 1):
        labels = ["/".join(p[-n:]) for p in parts]
        if len(set(labels)) == len(labels):
            return labels
    return [str(p) for p in paths]


def model_words(pos_encoding: str, arch: str | None, positions: str = "") -> str:
    """A run's model as every view that tells runs apart names it: its positional
    encoding (followed by `positions`, e.g. " positions"), then its form's `label` where
    it is not the default encoder-decoder ("sinusoidal, decoder-only"); a form that
    reads no positions, its form alone ("LSTM", never "none positions")."""
    from jabcli.model.registry import FORMS

    form = FORMS.get(arch or "encoder_decoder")
    if form is None:  # the user's own (by its class), or one this version does not know
        return f"{pos_encoding}{positions}, {short_name(arch or '')}"
    if not form.positional:
        return form.label
    return f"{pos_encoding}{positions}" + (f", {form.label}" if form.label else "")


def training_header(experiment, path, parameters: int, flops: float | None) -> str:
    """The line a training run opens with: what trains, into where, on what, how big."""
    import jax

    cfg = experiment.config
    seeds = f"{cfg.train.seeds} seeds of " if cfg.train.seeds > 1 else ""
    each = " each" if cfg.train.seeds > 1 else ""
    cost = f", {flops / 1e9:.2g} GFLOP per step" if flops else ""
    devices = f"{jax.device_count()} {jax.default_backend()} device(s)"
    model = model_words(cfg.model.positions, cfg.model.arch)
    return (
        f"Training {seeds}{short_name(cfg.task.name)} "
        f"(lengths {cfg.task.min_len}-{cfg.task.max_len}, "
        f"{model}) into {path} on {devices}; {parameters:,} parameters{cost}{each}"
    )


# studies


def study_figure(value: SpreadFigure | None, show=percent) -> str:
    """A study's figure: median [min-max] over seeds, or '-' where it was not measured."""
    if value is None:
        return "-"
    if value["min"] == value["max"]:
        return show(value["median"])
    return median_range(value["median"], value["min"], value["max"], show)


# What `jab study show --metric` can show, and its name in the heading.
STUDY_METRICS: dict[FigureName, str] = {
    "seq_acc": "Exact match",
    "token_acc": "Token accuracy (answer and <eos>)",
    "symbol_acc": "Per-symbol accuracy of the answers as written",
    "forced_symbol_acc": "Per-symbol accuracy at the answer's true length, as Delétang et al. "
    "(2023) score it",
}


def study_cells(results: StudyTable) -> list[tuple[str, list[str]]]:
    """Each cell's name and the figures of its row: steps, training seconds, each bin's
    exact match or `results["metric"]` (with the forced exact match after a slash),
    longest length at >= 50% exact match."""
    from jabcli.studies.study_results import BIN_KEYS

    key = BIN_KEYS[results.get("metric", "seq_acc")]
    rows = []
    for c in results["cells"]:
        if c["state"] != "measured":
            rows.append(
                (c["name"], [str(c["steps"]), "-", *["-"] * len(results["bins"]), c["state"]])
            )
            continue
        figures = []
        for b in results["bins"]:
            text = study_figure(c.get(key, {}).get(b))
            if key == "bins" and "forced_bins" in c and b in c["forced_bins"]:
                text += " / " + percent(c["forced_bins"][b]["median"])
            figures.append(text)
        longest = study_figure(c["longest_at_half"], lambda x: f"{x:g}")
        rows.append((c["name"], [str(c["step"]), f"{c['train_s']:.0f}", *figures, longest]))
    return rows


def study_heading(results: StudyTable) -> str:
    counts = sorted({c["seeds"] for c in results["cells"]})
    seeds = f"{'/'.join(map(str, counts))} seed" + ("" if counts == [1] else "s")
    forced = (
        "; after the slash: the median with the answer's true length imposed"
        if results["force_length"]
        else ""
    )
    samples = results["samples_per_length"]
    metric = results.get("metric", "seq_acc")
    forced = forced if metric == "seq_acc" else ""
    return (
        f"{STUDY_METRICS[metric]} by input length, median [min-max] over {seeds}; "
        f"{samples} held-out inputs per length{forced}"
    )


STUDY_COLUMNS = ("steps", "training s")


def study_markdown(results: StudyTable) -> str:
    """A study's table as Markdown, for a README."""
    longest = "longest length at ≥ 50%"
    if results.get("metric", "seq_acc") != "seq_acc":
        longest += " exact match"
    columns = ["cell", *STUDY_COLUMNS, *results["bins"], longest]
    lines = [
        study_heading(results),
        "",
        "| " + " | ".join(columns) + " |",
        "|---|" + "---:|" * (len(columns) - 1),
    ]
    lines += [f"| {name} | " + " | ".join(figures) + " |" for name, figures in study_cells(results)]
    return "\n".join(lines)
