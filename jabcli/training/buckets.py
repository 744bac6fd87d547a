"""Length buckets: with train.lengths=per_batch every row of a batch has the same length,
so a step need not run the batch padded to task.max_len, as the paper's code never does
(it compiles one program per length). The lengths are cut into a few ranges
(`bucket_lengths`); a step runs the model's forward and backward pass at the widths of the
shortest range that holds its batch, one branch of a `lax.switch` per range inside the
one compiled training program (a few ranges, not one per length: each is compiled).
At lengths 1-40, a batch of 3 symbols costs what one of 5 does, not what one of 40 does.

The batch is drawn as before, at the full width, and cut down; padding is masked, so the
loss and gradients are the full-width step's up to float rounding. Only dropout differs:
its masks are drawn at the narrower width, so they are other masks.

Only where it pays and holds: one length per batch (per_row batches nearly always reach
the longest range), one seed per program (several seeds draw several lengths, and a
switch under `vmap` runs every branch), and a model form whose rows do not depend on the
padding after them (`Form.trims_padding`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import jax
import jax.numpy as jnp

from jabcli.core.tokenizer import PAD_ID
from jabcli.experiment.experiment import Experiment
from jabcli.tasks import derived
from jabcli.training.packing import Rows

# At most BUCKETS ranges, each of at least MIN_LENGTHS lengths: each branch adds its own
# compilation to a run's first start, and a step's cost grows about as its width does
# (at 1-40, batches are 22.5 symbols wide on average, not 40).
BUCKETS, MIN_LENGTHS = 8, 4

Out = TypeVar("Out")


def applies(experiment: Experiment) -> bool:
    """Whether a training step runs its batch at its length's bucket (see above)."""
    tr = experiment.config.train
    return (
        tr.lengths == "per_batch"
        and tr.seeds == 1
        and experiment.form.trims_padding
        and not experiment.packs
        and len(bucket_lengths(experiment.config.task.min_len, experiment.config.task.max_len)) > 1
    )


def bucket_lengths(min_len: int, max_len: int) -> list[int]:
    """The longest source (in symbols) of each bucket: min_len..max_len cut into ranges
    as equal as whole lengths allow (1-40: 5, 10, ..., 40; 1-8: 4, 8)."""
    span = max_len - min_len + 1
    count = max(1, min(BUCKETS, span // MIN_LENGTHS))
    return sorted({min_len - 1 + -(-span * k // count) for k in range(1, count + 1)})


def trimmed(rows: Rows, src_width: int, tgt_width: int) -> Rows:
    """The rows' first `src_width` source columns and `tgt_width` answer columns."""
    s, t = src_width, tgt_width
    return Rows(
        rows.src[:, :s],
        rows.tgt_in[:, :t],
        rows.tgt_out[:, :t],
        rows.src_positions[:, :s],
        rows.tgt_positions[:, :t],
    )


def bucketed(experiment: Experiment, fn: Callable[[Rows], Out], rows: Rows) -> Out:
    """`fn(rows)`, computed on the rows cut to the narrowest bucket that holds every
    source and answer token of the batch (the widest bucket: the rows as they are)."""
    t = experiment.config.task
    *narrower, _ = [
        derived.widths(experiment.task, n) for n in bucket_lengths(t.min_len, t.max_len)
    ]
    src_needed = jnp.max(jnp.sum(rows.src != PAD_ID, axis=1))
    tgt_needed = jnp.max(jnp.sum(rows.tgt_out != PAD_ID, axis=1))
    fits = [(src_needed <= s) & (tgt_needed <= a) for s, a in narrower] + [jnp.asarray(True)]
    index = jnp.argmax(jnp.stack(fits))  # the first that fits

    def at(widths: tuple[int, int]) -> Callable[[Rows], Out]:
        return lambda rows: fn(trimmed(rows, *widths))

    return jax.lax.switch(index, [*map(at, narrower), fn], rows)
