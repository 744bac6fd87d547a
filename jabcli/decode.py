"""Batched greedy decoding, jitted, stopping once every sequence has produced <eos>.

`greedy_decode` feeds one token at a time through the decoder with a key/value cache
(the encoder's keys and values are computed once per sequence); `greedy_decode_full`
reruns the whole decoder at every step and is kept as the reference it is tested
and benchmarked against. Both read the positions [B, S] and [B, max_out] the model's
scheme drew (`Experiment.positions`). A row whose source holds no symbol (padding
added to fill a batch) counts as finished from the start and gets no answer.

Given `lengths` [B], the answers' true lengths, decoding is forced to that length:
<eos> is never chosen before it and always written at it (`jab eval --force-length`),
so what is scored is the content alone.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from jabcli.model import ModelFns
from jabcli.tokenizer import BOS_ID, EOS_ID, PAD_ID


def _finish(tokens: jax.Array) -> jax.Array:
    """Pad everything after each row's first <eos>."""
    after_eos = jnp.cumsum(tokens == EOS_ID, axis=1) - (tokens == EOS_ID) > 0
    return jnp.where(after_eos, PAD_ID, tokens)


def empty_rows(src: jax.Array) -> jax.Array:
    """[B] True where a source has no symbol: filler rows that need no answer."""
    return ~jnp.any((src != PAD_ID) & (src != EOS_ID), axis=1)


def _choose(logits: jax.Array, position, empty: jax.Array, lengths: jax.Array | None):
    """[B, V] logits at target index `position` -> the greedy tokens [B]."""
    if lengths is not None:
        logits = logits.at[:, EOS_ID].set(-jnp.inf)
    token = jnp.argmax(logits, axis=-1)
    if lengths is not None:
        token = jnp.where(position == lengths, EOS_ID, token)
    return jnp.where(empty, PAD_ID, token).astype(jnp.int32)


def _not_done(position: jax.Array, out: jax.Array, empty: jax.Array, max_out: int) -> jax.Array:
    return (position < max_out) & ~jnp.all(empty | jnp.any(out == EOS_ID, axis=1))


@partial(jax.jit, static_argnames=("experiment", "max_out"))
def answer(experiment, params, key: jax.Array, src: jax.Array, max_out: int, lengths=None):
    """What the model answers to sources [B, S] (see `greedy_decode`), reading the
    positions `experiment.positions` gives them (randomized ones drawn from `key`); and
    those positions. One compiled program, which the persistent cache keeps."""
    positions = experiment.positions(key, src, max_out)
    return greedy_decode(experiment.model, params, src, max_out, *positions, lengths), positions


@partial(jax.jit, static_argnames=("fns", "max_out"))
def greedy_decode(
    fns: ModelFns,
    params,
    src: jax.Array,
    max_out: int,
    src_positions: jax.Array,
    tgt_positions: jax.Array,
    lengths: jax.Array | None = None,
) -> jax.Array:
    """src [B, S] -> output ids [B, max_out], <eos>-terminated and <pad>-filled."""
    batch, empty = src.shape[0], empty_rows(src)
    memory = fns.encode(params, None, src, src_positions)
    cache = fns.init_cache(params, None, memory, src_positions, max_out)
    out = jnp.full((batch, max_out), PAD_ID, jnp.int32)

    def step(carry):
        position, token, out, cache = carry
        logits, cache = fns.decode_step(
            params, None, token, position, cache, src, tgt_positions, src_positions
        )
        token = _choose(logits, position, empty, lengths)
        out = jax.lax.dynamic_update_slice_in_dim(out, token[:, None], position, axis=1)
        return position + 1, token, out, cache

    start = (0, jnp.full((batch,), BOS_ID, jnp.int32), out, cache)
    _, _, out, _ = jax.lax.while_loop(
        lambda carry: _not_done(carry[0], carry[2], empty, max_out), step, start
    )
    return _finish(out)


@partial(jax.jit, static_argnames=("fns", "max_out"))
def greedy_decode_full(
    fns: ModelFns,
    params,
    src: jax.Array,
    max_out: int,
    src_positions: jax.Array,
    tgt_positions: jax.Array,
    lengths: jax.Array | None = None,
) -> jax.Array:
    """Same answer as `greedy_decode`, recomputing the decoder over the whole prefix."""
    batch, empty = src.shape[0], empty_rows(src)
    tgt_in = jnp.full((batch, max_out), PAD_ID, jnp.int32).at[:, 0].set(BOS_ID)
    out = jnp.full((batch, max_out), PAD_ID, jnp.int32)

    def step(carry):
        position, tgt_in, out = carry
        logits, _ = fns.forward(
            params, None, src, tgt_in, src_positions=src_positions, tgt_positions=tgt_positions
        )
        token = _choose(logits[:, position], position, empty, lengths)
        out = out.at[:, position].set(token)
        tgt_in = jax.lax.dynamic_update_slice_in_dim(
            tgt_in, token[:, None], jnp.minimum(position + 1, max_out - 1), axis=1
        )
        return position + 1, tgt_in, out

    _, _, out = jax.lax.while_loop(
        lambda carry: _not_done(carry[0], carry[2], empty, max_out), step, (0, tgt_in, out)
    )
    return _finish(out)
