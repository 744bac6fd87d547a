"""Packing: two training examples share one row of the batch, so that far less of it
is padding (at lengths 1-16, about half of an unpacked batch is).

A batch of `train.batch_size` examples is drawn in pairs whose source lengths add up to
the same total: the first of each pair has a length uniform in [min_len, max_len], the
second the complementary length min_len + max_len - that, uniform too. Each row holds
the first example of its pair, then the second, then (for some tasks) padding; segment
ids say which example a token belongs to (1 or 2; 0 for padding), and attention never
crosses from one to the other (model.segment_mask). Positions are each example's own,
computed before packing, so every example is seen exactly as it would be alone: the
same logits, to rounding. Only generated tasks are packed (their lengths can be drawn);
a file task's batch is one example per row.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jabcli.core.tokenizer import PAD_ID


class Rows(NamedTuple):
    """What one training step reads: token ids, the positions the model gives them, and
    which example each token belongs to (None when every row is one example)."""

    src: jax.Array  # [R, S]
    tgt_in: jax.Array  # [R, T]
    tgt_out: jax.Array  # [R, T]
    src_positions: jax.Array  # [R, S]
    tgt_positions: jax.Array  # [R, T]
    src_segments: jax.Array | None = None  # [R, S]: 1, 2, or 0 for padding
    tgt_segments: jax.Array | None = None  # [R, T]


def paired_lengths(key: jax.Array, pairs: int, min_len: int, max_len: int) -> jax.Array:
    """[2 * pairs] source lengths: `pairs` uniform ones, then each one's complement."""
    first = jax.random.randint(key, (pairs,), min_len, max_len + 1)
    return jnp.concatenate([first, min_len + max_len - first])


def pack_rows(x: jax.Array, counts: jax.Array, width: int) -> tuple[jax.Array, jax.Array]:
    """Rows [2R, W] of which the first `counts` entries are real -> [R, width] rows
    holding row r's real entries, then row R + r's, then padding (<pad>, position 0); and
    segment ids."""
    pairs = x.shape[0] // 2
    first, second = x[:pairs], x[pairs:]
    used = counts[:pairs, None]
    t = jnp.arange(width)[None, :]
    in_first = t < used
    in_second = ~in_first & (t < used + counts[pairs:, None])
    last = x.shape[1] - 1
    at_first = jnp.broadcast_to(jnp.minimum(t, last), (pairs, width))
    from_first = jnp.take_along_axis(first, at_first, axis=1)
    from_second = jnp.take_along_axis(second, jnp.clip(t - used, 0, last), axis=1)
    packed = jnp.where(in_first, from_first, jnp.where(in_second, from_second, PAD_ID))
    segments = jnp.where(in_first, 1, jnp.where(in_second, 2, 0)).astype(jnp.int32)
    return packed.astype(x.dtype), segments


def pack(rows: Rows, source_width: int, target_width: int) -> Rows:
    """One example per row [2R, ...] -> two per row [R, ...], with segment ids."""
    src_counts = jnp.sum(rows.src != PAD_ID, axis=1)
    tgt_counts = jnp.sum(rows.tgt_out != PAD_ID, axis=1)
    src, src_segments = pack_rows(rows.src, src_counts, source_width)
    tgt_in, tgt_segments = pack_rows(rows.tgt_in, tgt_counts, target_width)
    tgt_out, _ = pack_rows(rows.tgt_out, tgt_counts, target_width)
    src_positions, _ = pack_rows(rows.src_positions, src_counts, source_width)
    tgt_positions, _ = pack_rows(rows.tgt_positions, tgt_counts, target_width)
    return Rows(src, tgt_in, tgt_out, src_positions, tgt_positions, src_segments, tgt_segments)
