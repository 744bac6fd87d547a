"""What a stretch of training did, as one record: `Trained`, what `Trainer.run` returns,
and what a training session's `Outcome` (session.py) extends with where it was saved and
how it ended. Light on purpose (no JAX): the terminal's and the notebook's views read it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from jabcli.core.spread import every_seed

if TYPE_CHECKING:
    from jabcli.evaluation.figures import HeldOutResult


@dataclass
class Trained:
    """What `Trainer.run` did: the step it stopped at and the step it started from, its
    wall time, each seed's last held-out evaluation (empty: none) and whether each of
    them reached train.target_seq_acc, as the loop decided when to stop."""

    step: int
    start_step: int
    elapsed_s: float
    last_eval: list[HeldOutResult]  # one per seed; empty if never evaluated
    at_target: list[bool]  # one per seed evaluated: it reached train.target_seq_acc

    @property
    def reached(self) -> int:
        """How many seeds reached the target."""
        return sum(self.at_target)

    @property
    def reached_target(self) -> bool:
        """Every seed reached the target (the Trainer's reason to stop early)."""
        return every_seed(self.at_target)
