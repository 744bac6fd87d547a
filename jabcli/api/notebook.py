"""What jab shows in Jupyter: the HTML of results, predictions, comparisons and
attention, the pictures of curves (plots.py), and training's progress. The terminal's
twins are cli/live.py, tables.py and pictures.py, and all say things in the words of
formatting.py; the values come from the API (api.py), which calls these to render itself.
No Rich here.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from jabcli.api import plots
from jabcli.api.formatting import (
    figure,
    model_words,
    percent,
    spread,
    study_cells,
    study_heading,
    training_header,
)
from jabcli.core.spread import every_seed
from jabcli.training.session import Observer

if TYPE_CHECKING:
    from collections.abc import Sequence

    from jabcli.evaluation.figures import HeldOutResult
    from jabcli.inspection.inspection import Evaluated, Prediction
    from jabcli.runs.metrics import LogRecord
    from jabcli.studies.study_results import StudyTable


def in_notebook() -> bool:
    """Whether this is a Jupyter kernel (where HTML, not a terminal, shows results)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def bar(x: float, width: int = 100) -> str:
    return (
        f'<div style="background:#2ca02c;height:0.8em;width:{width * x:.0f}px" '
        f'title="{percent(x)}"></div>'
    )


def result_html(result: Evaluated) -> str:
    """`jab eval`'s report: the summary line, then exact match by length with bars."""
    forced = "forced_seq_acc" in result
    head = "<th>length</th><th>samples</th><th>exact match</th><th></th>" + (
        "<th>at true length</th>" if forced else ""
    )
    rows = "".join(
        f"<tr><td>{n}</td><td>{row['samples']}</td><td>{figure(row, 'seq_acc')}</td>"
        f"<td>{bar(row['seq_acc'])}</td>"
        + (f"<td>{figure(row, 'forced_seq_acc')}</td>" if forced else "")
        + "</tr>"
        for n, row in sorted(result["per_length"].items())
    )
    seeds = f", median [min-max] of {len(result['seeds'])} seeds" if "seeds" in result else ""
    at_length = f", {figure(result, 'forced_seq_acc')} at the true length" if forced else ""
    return (
        f"<p><b>{html.escape(result['run'])}</b>, step {result['step']}: exact match "
        f"{figure(result, 'seq_acc')}{at_length}, token accuracy "
        f"{figure(result, 'token_acc')}{seeds}</p><table><tr>{head}</tr>{rows}</table>"
    )


def comparison_html(results: Sequence[Evaluated]) -> str:
    """`jab compare`'s table: one row per length, one column per run, bars under figures;
    lengths a run trained on are marked *."""
    head = "".join(
        f"<th>{html.escape(r['run'].rstrip('/').split('/')[-1])}<br>"
        f"<small>{html.escape(r['task'])}, "
        f"{html.escape(model_words(r['pos_encoding'], r['arch']))}, "
        f"{r['train_lengths'][0]}-{r['train_lengths'][1]}"
        + (f", {len(r['seeds'])} seeds" if "seeds" in r else "")
        + "</small></th>"
        for r in results
    )
    rows = ""
    for n in sorted({n for r in results for n in r["per_length"]}):
        cells = ""
        for r in results:
            row = r["per_length"].get(n)
            low, high = r["train_lengths"]
            mark = "*" if low <= n <= high else ""
            cells += (
                "<td>-</td>"
                if row is None
                else f"<td>{figure(row, 'seq_acc')}{mark}{bar(row['seq_acc'], 60)}</td>"
            )
        rows += f"<tr><td>{n}</td>{cells}</tr>"
    plot = curves_svg(plots.comparison_plot(results)) or missing_plots() or ""
    return (
        "<p>Exact match by input length (* = a length the run trained on)</p>"
        f"<table><tr><th>length</th>{head}</tr>{rows}</table>{plot}"
    )


PREDICTION = ("input", "output", "expected")
MARKS = {True: "✓ right", False: "✗ wrong", None: "? no reference"}


def predictions_html(rows: Sequence[Prediction]) -> str:
    """`jab predict`'s rows: input, answer, reference, right or wrong."""
    body = "".join(
        "<tr>"
        + "".join(
            f"<td><code>{html.escape(text or '-')}</code></td>"
            for text in (r["input"], r["output"], r["expected"])
        )
        + f"<td>{MARKS[r['correct']]}</td></tr>"
        for r in rows
    )
    head = "".join(f"<th>{k}</th>" for k in PREDICTION)
    return f"<table><tr>{head}<th></th></tr>{body}</table>"


def attention_html(attention: Any) -> str:
    """One layer's attention (api.Attention): a heatmap per head, queries down and keys
    across, each cell's weight shown on hover."""

    def grid(head: int) -> str:
        top = "".join(f"<th>{html.escape(c)}</th>" for c in attention.cols)
        body = ""
        for label, row in zip(attention.rows, attention.weights[head]):
            cells = "".join(
                f'<td title="{w:.3f}" style="width:1.4em;height:1.4em;'
                f'background:rgba(31,119,180,{w:.3f})"></td>'
                for w in row
            )
            body += f"<tr><th>{html.escape(label)}</th>{cells}</tr>"
        return f"<table><caption>head {head}</caption><tr><th></th>{top}</tr>{body}</table>"

    heads = "".join(
        f'<div style="display:inline-block;margin:4px">{grid(h)}</div>'
        for h in range(len(attention.weights))
    )
    what = (
        f"{attention.kind} after each step (rows; columns: {html.escape(attention.memory)})"
        if attention.memory
        else f"{attention.kind} attention, layer {attention.layer}"
    )
    return (
        f"<p>{what}, answering <code>{html.escape(attention.input)}</code> with "
        f"<code>{html.escape(attention.answer)}</code> ({attention.verdict})</p>{heads}"
    )


def curves_svg(plot: list[Any] | plots.Plot) -> str | None:
    """Curves (inspection.Curve, or a plot of them) as an SVG picture drawn by matplotlib;
    None without the extra `plots` (`missing_plots` then says how to get it)."""
    plot = plot if isinstance(plot, plots.Plot) else plots.Plot(plot)
    return plots.picture(plot, "svg").decode() if plots.available() else None


def missing_plots() -> str | None:
    """One line saying how to get pictures, when matplotlib is missing; else None."""
    if plots.available():
        return None
    return f"<p><i>Pictures need matplotlib: {html.escape(plots.INSTALL)}</i></p>"


def study_html(results: StudyTable) -> str:
    """`jab study show`: the table of cells by length bins, then the plot."""
    head = "".join(
        f"<th>{html.escape(c)}</th>"
        for c in ("cell", "steps", "training s", *results["bins"], "longest at ≥ 50%")
    )
    rows = "".join(
        f"<tr><td>{html.escape(name)}</td>"
        + "".join(f"<td>{html.escape(f)}</td>" for f in figures)
        + "</tr>"
        for name, figures in study_cells(results)
    )
    measured = any(c["state"] == "measured" for c in results["cells"])
    plot = (curves_svg(plots.study_plot(results)) or missing_plots()) if measured else ""
    return (
        f"<p><b>Study {html.escape(results['study'])}</b> ({html.escape(results['folder'])}): "
        f"{html.escape(study_heading(results))}</p><table><tr>{head}</tr>{rows}</table>{plot}"
    )


class NotebookView(Observer):
    """Training's progress in a notebook: one output, updated in place, with a progress
    bar, the latest batch's loss and exact match, and the latest held-out exact match
    (of a group of seeds: median [min-max], as in the terminal's TrainView)."""

    def __init__(self) -> None:
        self.handle: Any = None
        self.header = ""
        self.step = 0
        self.steps = 1
        self.metrics: list[LogRecord] = []
        self.eval: list[HeldOutResult] = []
        self.notes: list[str] = []
        self.target = 1.0

    def begin(self, path, experiment, start_step: int, parameters: int, flops=None) -> None:
        from IPython.display import HTML, display

        cfg = experiment.config
        self.header = html.escape(training_header(experiment, path, parameters, flops))
        self.step, self.steps = start_step, cfg.train.steps
        self.target = cfg.train.target_seq_acc
        self.handle = display(HTML(self.render()), display_id=True)

    def note(self, message: str) -> None:
        self.notes.append(message)
        self.update()

    def log(self, records: list[LogRecord]) -> None:
        self.metrics = records
        self.step = records[0].step
        self.update()

    def evaluated(self, results: list[HeldOutResult]) -> None:
        self.eval = results
        self.update()

    def update(self) -> None:
        if self.handle is not None:
            from IPython.display import HTML

            self.handle.update(HTML(self.render()))

    def render(self) -> str:
        m, ev = self.metrics, self.eval
        figures = []
        if m:
            loss = "{:.4f}".format
            figures.append(f"loss {spread([r.loss for r in m], loss)}")
            figures.append(f"batch exact match {spread([r.seq_acc for r in m])}")
            figures.append(f"{m[0].steps_per_sec:.0f} steps/s")
        if ev:
            figures.append(f"held-out exact match {spread([e.scores['seq_acc'] for e in ev])}")
            if every_seed([e.at_target for e in ev]):  # the Trainer's word
                figures.append(f"target {percent(self.target)} reached")
        notes = "".join(f"<br>{html.escape(n)}" for n in self.notes)
        return (
            f"<p>{self.header}{notes}</p>"
            f'<progress value="{self.step}" max="{self.steps}" style="width:60%"></progress> '
            f"step {self.step} of {self.steps}<br><small>{' · '.join(figures)}</small>"
        )
