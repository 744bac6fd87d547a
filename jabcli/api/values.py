"""The values jab's Python API returns: plain dicts, lists and arrays that a script reads
as `--json` would give them, and that render themselves in Jupyter (their HTML and SVG are
notebook.py's, imported only when Jupyter asks)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np

if TYPE_CHECKING:
    from jabcli.inspection.inspection import Evaluated, Prediction
    from jabcli.studies.study_results import StudyTable


class StudyResults(dict):
    """`jab study show --json` as a dict (its `cells` hold every figure); in Jupyter, the
    table by length bins and the plot of exact match by length."""

    def _repr_html_(self) -> str:
        from jabcli.api.notebook import study_html

        return study_html(cast("StudyTable", self))  # what load_study holds


class Result(dict):
    """What `jab eval --json` prints, as a dict, shown in Jupyter as a table with bars."""

    def _repr_pretty_(self, printer, cycle: bool) -> None:  # IPython: not every example
        printer.text(
            f"Result(run={self['run']!r}, step={self['step']}, seq_acc={self['seq_acc']:.4f}, "
            f"token_acc={self['token_acc']:.4f}, lengths {self['min_len']}-{self['max_len']}, "
            f"keys: {', '.join(self)})"
        )

    def _repr_html_(self) -> str:
        from jabcli.api.notebook import result_html

        return result_html(cast("Evaluated", self))  # what evaluate_runs made


class Comparison(list):
    """`jab compare`'s results, one `Result` per run; in Jupyter, a table by length."""

    def _repr_html_(self) -> str:
        from jabcli.api.notebook import comparison_html

        return comparison_html(cast("list[Evaluated]", self))  # what evaluate_runs made


class Predictions(list):
    """`jab predict`'s rows (input, output, expected, correct), as an HTML table;
    `skipped`: the inputs `skip_bad` left out, {index: why}."""

    def __init__(self, rows: Iterable[Prediction] = (), skipped: dict[int, str] | None = None):
        super().__init__(rows)
        self.skipped = skipped or {}

    def _repr_html_(self) -> str:
        from jabcli.api.notebook import predictions_html

        return predictions_html(self)


class Curves(list):
    """`jab curves`'s curves (inspection.Curve: name, metric, steps, values, and for a
    group the band low-high); in Jupyter, one picture."""

    def _repr_svg_(self) -> str | None:
        from jabcli.api.notebook import curves_svg

        return curves_svg(self)

    def _repr_html_(self) -> str | None:  # only when there is no picture: how to get one
        from jabcli.api.notebook import missing_plots

        return missing_plots()


@dataclass
class Attention:
    """One layer's attention weights [heads, queries, keys], with the tokens that label
    the queries (`rows`) and keys (`cols`); in Jupyter, a heatmap per head whose cells
    show their weight on hover. A "stack" or "tape" (a recurrent form's memory) is one
    head: each cell's size after each token read (rows), the largest 1, cells across."""

    kind: str
    input: str
    answer: str
    expected: str | None  # the task's reference answer, if it has one
    layer: int
    weights: np.ndarray
    rows: list[str]
    cols: list[str]
    memory: str | None = None  # a stack's or tape's: what its columns are

    @property
    def verdict(self) -> str:
        if self.expected is None:
            return "no reference answer"
        return "right" if self.answer == self.expected else f"wrong, expected {self.expected}"

    def _repr_html_(self) -> str:
        from jabcli.api.notebook import attention_html

        return attention_html(self)
