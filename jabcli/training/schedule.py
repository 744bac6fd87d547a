"""The learning-rate schedule and the optimizer: gradients clipped by their global norm,
then AdamW with linear warmup and a cosine decay (`make_optimizer`), its numbers taken as
values (`Schedule`) so that configs that differ only in them share one compiled program.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jabcli.core.settings import TrainConfig
from jabcli.experiment.experiment import Experiment


class Schedule(NamedTuple):
    """The numbers of the learning-rate schedule, linear warmup from 0 to `peak` then
    cosine decay to train.final_lr_fraction of it at train.steps (`learning_rate`). The
    training program takes them as values, not constants, so that configs which differ
    only in these numbers (`SCHEDULE_KEYS`) share one compiled program: a run extended
    with more steps, or a study's rows of learning rates, compile once.

    optax's own `warmup_cosine_decay_schedule` cannot be built inside the program from
    these numbers as traced values: it takes its step counts as Python ints and branches
    on its arguments in Python (`peak_value == 0.0`, `transition_steps <= 0`,
    `decay_steps > 0`), which a traced value refuses (TracerBoolConversionError). Hence
    `learning_rate`, whose bits a test checks against optax's."""

    peak: Any  # float32
    warmup: Any  # int32: steps of warmup
    per_warmup: Any  # float32: 1 / warmup
    decay: Any  # float32: steps of decay after warmup
    per_decay: Any  # float32: 1 / decay
    keep: Any  # float32: 1 - end / peak
    end: Any  # float32: end / peak

    @classmethod
    def of(cls, tr: TrainConfig) -> Schedule:
        """The numbers optax.warmup_cosine_decay_schedule computes from train's options,
        in double precision on the host, as it does; then as 32-bit values, with the
        reciprocals XLA makes of a division by a constant."""
        f32, peak = np.float32, tr.learning_rate
        warmup = min(tr.warmup_steps, tr.steps)
        decay = max(tr.steps, tr.warmup_steps + 1) - warmup
        end = peak * tr.final_lr_fraction / peak if peak else 0.0  # as optax computes it
        per_warmup = f32(1) / f32(warmup) if warmup else f32(np.inf)
        return cls(f32(peak), np.int32(warmup), per_warmup, f32(decay),
                   f32(1) / f32(decay), f32(1 - end), f32(end))  # fmt: skip


SCHEDULE_KEYS = ("steps", "learning_rate", "warmup_steps", "final_lr_fraction")


def learning_rate(schedule: Schedule, warms: bool, count: jax.Array) -> jax.Array:
    """The learning rate at optimizer step `count`, the same bits as the program XLA
    compiles of optax.warmup_cosine_decay_schedule with the schedule's numbers as
    constants: the same operations in the same order (a division by a constant is a
    product with its reciprocal), and, as there, no rising part without warmup
    (`warms`, which the program is compiled for)."""
    s = schedule
    rising = -s.peak * (1 - jnp.clip(count, 0, s.warmup) * s.per_warmup) ** 1 + s.peak
    start = s.warmup if warms else 0
    after = jnp.minimum(count - start, s.decay)
    cosine = 0.5 * (1 + jnp.cos((jnp.pi * after) * s.per_decay))
    falling = s.peak * (s.keep * cosine**1.0 + s.end)
    return jnp.where(count < start, rising if warms else 0.0, falling)


def make_optimizer(tr: TrainConfig, schedule: Schedule) -> optax.GradientTransformation:
    """AdamW with linear warmup then cosine decay, after global-norm clipping."""
    return optax.chain(
        optax.clip_by_global_norm(tr.clip_norm) if tr.clip_norm > 0 else optax.identity(),
        optax.adamw(
            functools.partial(learning_rate, schedule, tr.warmup_steps > 0),
            b1=0.9,
            b2=tr.adam_b2,
            weight_decay=tr.weight_decay,
        ),
    )


def without_schedule(experiment: Experiment) -> Experiment:
    """The experiment with its schedule's numbers (`SCHEDULE_KEYS`) at their defaults
    (but for no warmup): what its training programs are compiled from, which take those
    numbers as values."""
    tr = experiment.config.train
    defaults = {key: getattr(TrainConfig(), key) for key in SCHEDULE_KEYS}
    if tr.warmup_steps == 0:  # a schedule without warmup is another program
        defaults["warmup_steps"] = 0
    config = dataclasses.replace(experiment.config, train=dataclasses.replace(tr, **defaults))
    return dataclasses.replace(experiment, config=config)
