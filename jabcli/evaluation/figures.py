"""What a held-out evaluation measures, as records: the figures of a set of answers
(`Figures`), an evaluation's figures overall, by length and its examples (`Scores`, what
`jab eval --json` prints with the run's facts), and one seed's evaluation as training
reports it (`HeldOutResult`). No JAX here: the views and the study tables read them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypedDict

from typing_extensions import NotRequired  # typing has it from Python 3.11


class Figures(TypedDict):
    """Accuracies of a set of answers (every figure of `score`, see there); the forced
    ones only when measured with `force_length`. A group of seeds' figures are medians,
    each with its [min, max] under `<name>_range` (`inspection.combine`, from a `Spread`)."""

    samples: int
    token_acc: float
    token_acc_range: NotRequired[list[float]]
    symbol_acc: float
    symbol_acc_range: NotRequired[list[float]]
    seq_acc: float
    seq_acc_range: NotRequired[list[float]]
    forced_seq_acc: NotRequired[float]
    forced_seq_acc_range: NotRequired[list[float]]
    forced_symbol_acc: NotRequired[float]
    forced_symbol_acc_range: NotRequired[list[float]]


class Example(TypedDict):
    """One held-out input, the model's answer, the reference and whether they agree."""

    input: str
    output: str
    expected: str
    correct: bool


class Scores(Figures):
    """A held-out evaluation: the figures overall and by source length, every example."""

    per_length: dict[int, Figures]
    examples: list[Example]


@dataclass(frozen=True)
class HeldOutResult:
    """One seed's held-out evaluation as `Trainer.run` reports it (`on_eval`): its scores,
    the step they were made at, and whether they reached train.target_seq_acc."""

    scores: Scores
    step: int
    at_target: bool


FigureName = Literal["token_acc", "symbol_acc", "seq_acc", "forced_seq_acc", "forced_symbol_acc"]
FIGURES: tuple[FigureName, ...] = (
    "token_acc",
    "symbol_acc",
    "seq_acc",
    "forced_seq_acc",
    "forced_symbol_acc",
)

# Where a group of seeds keeps each figure's [min, max] (`Figures`)
RangeName = Literal[
    "token_acc_range",
    "symbol_acc_range",
    "seq_acc_range",
    "forced_seq_acc_range",
    "forced_symbol_acc_range",
]
RANGES: dict[FigureName, RangeName] = {
    "token_acc": "token_acc_range",
    "symbol_acc": "symbol_acc_range",
    "seq_acc": "seq_acc_range",
    "forced_seq_acc": "forced_seq_acc_range",
    "forced_symbol_acc": "forced_symbol_acc_range",
}
