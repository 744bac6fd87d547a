"""The arrays tasks are made of: a `Batch` as the model reads it, how sources and answers
become one (`assemble`), and the small row-wise helpers task code is written with
(`columns`, `gather`, `source_lengths`). Nothing here knows a task."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from jabcli.core.runtime import Lazy
from jabcli.core.tokenizer import BOS_ID, EOS_ID, PAD_ID

if TYPE_CHECKING:
    import jax
    import jax.numpy as jnp
else:
    jax, jnp = Lazy("jax"), Lazy("jax.numpy")  # so that `jab tasks` does not import JAX

UNALIGNED = -2  # alignment index of tokens that read no input symbol (see Task.alignment)


class Batch(NamedTuple):
    """Padded id arrays: `src` [batch, src_len], `tgt_in`/`tgt_out` [batch, tgt_len].

    `src` is the source followed by <eos>.
    `tgt_in` is <bos> + target, `tgt_out` is target + <eos>: the decoder reads one and
    predicts the other.
    """

    src: jax.Array
    tgt_in: jax.Array
    tgt_out: jax.Array


def assemble(
    tokens: jax.Array,
    lengths: jax.Array,
    target: jax.Array,
    target_lengths: jax.Array,
    tgt_len: int,
) -> Batch:
    """Padded sources and targets with their lengths -> the arrays the model reads."""
    tgt_in, tgt_out = decoder_arrays(target, target_lengths, tgt_len)
    return Batch(source_array(tokens, lengths), tgt_in, tgt_out)


def source_array(tokens: jax.Array, lengths: jax.Array) -> jax.Array:
    """Padded ids [batch, L] -> [batch, L + 1] with <eos> after each source.

    The end marker gives the encoder a fixed point to count back from, which is what
    reverse (and any task whose output depends on the length) needs.
    """
    padded = jnp.pad(tokens, ((0, 0), (0, 1)), constant_values=PAD_ID)
    at_end = jnp.arange(padded.shape[1])[None, :] == lengths[:, None]
    return jnp.where(at_end, EOS_ID, padded).astype(jnp.int32)


def source_lengths(src: jax.Array) -> jax.Array:
    """[batch] the number of symbols in each row of `source_array`'s output."""
    return jnp.sum((src != PAD_ID) & (src != EOS_ID), axis=1)


def decoder_arrays(
    target: jax.Array, lengths: jax.Array, tgt_len: int
) -> tuple[jax.Array, jax.Array]:
    """Target ids [batch, T] and lengths -> <bos> + target and target + <eos>, [batch, tgt_len]."""
    batch, width = target.shape
    target = jnp.pad(target, ((0, 0), (0, tgt_len - width)), constant_values=PAD_ID)
    positions = jnp.arange(tgt_len)[None, :]
    tgt_out = jnp.where(positions == lengths[:, None], EOS_ID, target)
    tgt_out = jnp.where(positions <= lengths[:, None], tgt_out, PAD_ID)
    tgt_in = jnp.concatenate([jnp.full((batch, 1), BOS_ID, target.dtype), target[:, :-1]], axis=1)
    tgt_in = jnp.where(positions <= lengths[:, None], tgt_in, PAD_ID)
    return tgt_in.astype(jnp.int32), tgt_out.astype(jnp.int32)


def gather(tokens: jax.Array, index: jax.Array, length: jax.Array, fill=PAD_ID) -> jax.Array:
    """Row-wise tokens[b, index[b, i]] for i < length[b], `fill` after: [batch, width]."""
    picked = jnp.take_along_axis(tokens, jnp.clip(index, 0, tokens.shape[1] - 1), axis=1)
    return jnp.where(jnp.arange(index.shape[1])[None, :] < length[:, None], picked, fill)


def columns(tokens: jax.Array, width: int | None = None) -> jax.Array:
    """[1, width] column numbers 0, 1, ... (width defaults to the source width)."""
    return jnp.arange(tokens.shape[1] if width is None else width)[None, :]
