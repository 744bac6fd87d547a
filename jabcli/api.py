"""jab from Python, for notebooks and scripts: the calls the command line itself makes
(session, inspection), returning values that render themselves in Jupyter.

    import jabcli as jab
    run = jab.train("reverse", steps=600, overrides={"model.d_model": 64})
    run = jab.load("runs/reverse-20261130-101500")    # a run, or a group of seeds
    result = run.evaluate(lengths=(1, 32), samples=200)  # accuracy, per_length, mistakes
    run.predict(["12345"])                               # answers, right or wrong
    attn = run.attention("12345", kind="cross", layer=-1)  # numpy weights, token labels
    run.metrics()                                        # the rows of metrics.jsonl

Mistakes raise `JabError` with the message the command line prints.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from jabcli import inspection, runs
from jabcli.config import SAMPLES, SAMPLES_PER_LENGTH
from jabcli.errors import JabError

__all__ = ["Attention", "JabError", "Predictions", "Result", "Run", "load", "train"]


def train(
    task: str,
    steps: int | None = None,
    seed: int | None = None,
    seeds: int | None = None,
    overrides: dict[str, Any] | None = None,
    out: str | Path | None = None,
) -> Run:
    """`jab train --task TASK [--steps] [--seed] [--seeds] [--set KEY=VALUE]... [--out]`,
    with a progress bar (in a notebook too); returns the trained run."""
    from jabcli import runtime, session
    from jabcli.display import TrainView
    from jabcli.experiment import resolve

    runtime.configure()
    sets = [f"{key}={value}" for key, value in (overrides or {}).items()]
    experiment = resolve(task, None, sets, steps, seed, seeds)
    outcome = session.start(experiment, Path(out) if out is not None else None, TrainView())
    return Run(outcome.path)


def load(path: str | Path | None = None) -> Run:
    """A saved run or group of seeds (default: the newest under runs/)."""
    return Run(runs.open_runs(Path(path) if path is not None else None)[0])


@dataclass
class Run:
    """A run folder, or a group of seeds, and what can be asked of it."""

    path: Path

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        runs.open_runs(self.path)  # a clear error now if it is not a run

    def evaluate(
        self,
        lengths: tuple[int | None, int | None] | None = None,
        samples: int | None = None,
        each_length: bool | None = None,
        checkpoint: str = "latest",
        seed: int = 1,
        force_length: bool = False,
    ) -> Result:
        """Held-out accuracy, as `jab eval`: over the training lengths, or `samples`
        (200 by default) at every length in `lengths`; with `each_length=False`, `samples`
        (1000 by default) drawn over `lengths`. A group's figures are median [min-max].
        `force_length` adds `forced_seq_acc`: exact match with each answer's true length
        imposed on decoding."""
        from jabcli import runtime

        runtime.configure()
        each_length = lengths is not None if each_length is None else each_length
        if samples is None:
            samples = SAMPLES_PER_LENGTH if each_length else SAMPLES
        low, high = lengths if lengths is not None else (None, None)
        path, loaded = inspection.load_runs(self.path, checkpoint)
        return Result(
            inspection.evaluate_runs(
                path, loaded, samples, low, high, seed, each_length, force_length
            )
        )

    def predict(self, texts: list[str], checkpoint: str = "latest") -> Predictions:
        """Answers to `texts`, each marked against the task's reference, as `jab predict`."""
        from jabcli import runtime

        runtime.configure()
        return Predictions(inspection.predict(inspection.load(self.path, checkpoint), texts))

    def attention(
        self, text: str | None = None, kind: str = "cross", layer: int = -1, checkpoint="latest"
    ) -> Attention:
        """One layer's attention while answering `text`, as `jab show-attention`."""
        from jabcli import runtime

        runtime.configure()
        loaded = inspection.load(self.path, checkpoint)
        layers = loaded.experiment.config.model.num_layers
        if not -layers <= layer < layers:
            raise JabError(f"layer must be between 0 and {layers - 1} (or -1), got {layer}")
        picture = inspection.attention(loaded, text, kind)
        return Attention(
            picture.kind,
            picture.input,
            picture.answer,
            np.asarray(picture.weights[layer]),
            picture.rows,
            picture.cols,
        )

    def metrics(self) -> list[dict[str, Any]]:
        """The records of metrics.jsonl (of a group: its first seed's)."""
        return runs.open_runs(self.path)[1][0].read_metrics()

    def curve(self, metric: str = "loss") -> inspection.Curve:
        """A metric by step (a group: median, min and max), as `jab curves` draws it."""
        return inspection.curve(self.path, metric)


class Result(dict):
    """What `jab eval --json` prints, as a dict, shown in Jupyter as a table with bars."""

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{n}</td><td>{row['samples']}</td><td>{percent(row['seq_acc'])}</td>"
            f"<td>{bar(row['seq_acc'])}</td></tr>"
            for n, row in sorted(self["per_length"].items())
        )
        seeds = f", median of {len(self['seeds'])} seeds" if "seeds" in self else ""
        return (
            f"<p><b>{html.escape(self['run'])}</b>, step {self['step']}: exact match "
            f"{percent(self['seq_acc'])}, token accuracy {percent(self['token_acc'])}"
            f"{seeds}</p><table><tr><th>length</th><th>samples</th><th>exact match</th>"
            f"<th></th></tr>{rows}</table>"
        )


class Predictions(list):
    """`jab predict`'s rows (input, output, expected, correct), as an HTML table."""

    def _repr_html_(self) -> str:
        marks = {True: "✓ right", False: "✗ wrong", None: "? no reference"}
        rows = "".join(
            "<tr>"
            + "".join(f"<td><code>{html.escape(r[k] or '-')}</code></td>" for k in PREDICTION)
            + f"<td>{marks[r['correct']]}</td></tr>"
            for r in self
        )
        head = "".join(f"<th>{k}</th>" for k in PREDICTION)
        return f"<table><tr>{head}<th></th></tr>{rows}</table>"


PREDICTION = ("input", "output", "expected")


@dataclass
class Attention:
    """One layer's attention weights [heads, queries, keys], with the tokens that label
    the queries (`rows`) and keys (`cols`); in Jupyter, a heatmap per head whose cells
    show their weight on hover."""

    kind: str
    input: str
    answer: str
    weights: np.ndarray
    rows: list[str]
    cols: list[str]

    def _repr_html_(self) -> str:
        def grid(head: int) -> str:
            top = "".join(f"<th>{html.escape(c)}</th>" for c in self.cols)
            body = ""
            for label, row in zip(self.rows, self.weights[head]):
                cells = "".join(
                    f'<td title="{w:.3f}" style="width:1.4em;height:1.4em;'
                    f'background:rgba(31,119,180,{w:.3f})"></td>'
                    for w in row
                )
                body += f"<tr><th>{html.escape(label)}</th>{cells}</tr>"
            return f"<table><caption>head {head}</caption><tr><th></th>{top}</tr>{body}</table>"

        heads = "".join(
            f'<div style="display:inline-block;margin:4px">{grid(h)}</div>'
            for h in range(len(self.weights))
        )
        return (
            f"<p>{self.kind} attention answering <code>{html.escape(self.input)}</code> "
            f"with <code>{html.escape(self.answer)}</code></p>{heads}"
        )


def percent(x: float) -> str:
    return f"{100 * x:.1f}%"


def bar(x: float) -> str:
    return f'<div style="background:#2ca02c;height:0.8em;width:{100 * x:.0f}px"></div>'
