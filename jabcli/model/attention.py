"""Attention: the masks that say which keys a query may read, and multi-head scaled
dot-product attention, which also returns its weights and the keys and values it read
(written into a decoding cache at a target index). Shapes: B batch, Tq queries, Tk
keys, D = d_model, H heads, K = D / H.
"""

from __future__ import annotations

from typing import NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from jabcli.core.tokenizer import PAD_ID
from jabcli.model.positions import PositionalScheme

NEG_INF = -1e9


def padding_mask(query_len: int, key_ids: jax.Array) -> jax.Array:
    """[B, 1, Tq, Tk] True where the key is a real token."""
    return jnp.broadcast_to(
        (key_ids != PAD_ID)[:, None, None, :], (key_ids.shape[0], 1, query_len, key_ids.shape[1])
    )


def segment_mask(query_segments: jax.Array, key_segments: jax.Array) -> jax.Array:
    """[B, 1, Tq, Tk] True where the key is a real token of the query's own example, in
    rows that pack several (packing.py: segment ids 1, 2, ..., 0 for padding). A padding
    query may read any real key: its output is never used."""
    same = query_segments[:, :, None] == key_segments[:, None, :]
    free = (query_segments == 0)[:, :, None]
    return ((same | free) & (key_segments != 0)[:, None, :])[:, None]


def causal_mask(query_len: int, key_len: int, first: jax.Array | int = 0) -> jax.Array:
    """[1, 1, Tq, Tk] True where the key is not after the query; queries are target
    indices first, first + 1, ..."""
    query_index = first + jnp.arange(query_len)[:, None]
    return (jnp.arange(key_len)[None, :] <= query_index)[None, None]


def answer_columns(index: jax.Array | int, query_len: int, answer_from: int) -> jax.Array:
    """[query_len] 1.0 where the query tokens from column `index` on are the answer's (at
    column `answer_from` or later), else 0.0: which tokens model.answer_embedding marks."""
    return (index + jnp.arange(query_len) >= answer_from).astype(jnp.float32)


class KeyValues(NamedTuple):
    """Keys and values of one attention, each [B, Tk, H, K]."""

    keys: jax.Array
    values: jax.Array


class CachedKeyValues(NamedTuple):
    """A decoding cache's keys and values, each [B, H, Tk, K]: heads first, the layout the
    attention's matmuls read, so that a decoding step reads its caches in place instead
    of transposing every one of them at every step (a third of its time)."""

    keys: jax.Array
    values: jax.Array


def heads_first(kv: KeyValues) -> CachedKeyValues:
    return CachedKeyValues(*(x.transpose(0, 2, 1, 3) for x in kv))


class MultiHeadAttention(hk.Module):
    """Scaled dot-product attention over H heads that also returns its weights.

    Queries come from `inputs`; keys and values are projected from `context` (the same
    sequence for self-attention, the encoder's output for cross-attention) by one fused
    matmul. While decoding, `cache` holds the keys and values computed so far, and the
    context's are written into it at target index `index`. With no context, `cache`
    is read as it is: the encoder's keys and values, computed once per sequence.
    """

    def __init__(
        self,
        num_heads: int,
        d_model: int,
        scheme: PositionalScheme,
        causal: bool,
        bias: bool = True,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.scheme = scheme
        self.causal = causal
        self.num_heads = num_heads
        self.key_size = d_model // num_heads
        self.query_proj = hk.Linear(d_model, with_bias=bias, name="query")
        self.kv_proj = hk.Linear(2 * d_model, with_bias=bias, name="key_value")
        self.out_proj = hk.Linear(d_model, with_bias=bias, name="output")

    def project_kv(self, context: jax.Array, positions: jax.Array) -> KeyValues:
        """[B, Tk, D] at positions [B, Tk] -> keys and values, each [B, Tk, H, K]."""
        kv = self.kv_proj(context).reshape(*context.shape[:2], 2, self.num_heads, self.key_size)
        return KeyValues(self.scheme.rotate(kv[:, :, 0], positions), kv[:, :, 1])

    def __call__(
        self,
        inputs: jax.Array,
        context: jax.Array | None,
        mask: jax.Array,
        query_positions: jax.Array,
        key_positions: jax.Array,
        cache: KeyValues | CachedKeyValues | None = None,
        index: jax.Array | int = 0,
    ) -> tuple[jax.Array, jax.Array, KeyValues | CachedKeyValues]:
        """[B, Tq, D] -> ([B, Tq, D], weights [B, H, Tq, Tk], the keys and values read)."""
        batch, query_len, _ = inputs.shape
        if context is None:
            assert cache is not None, "without a context, the keys and values are the cache's"
            kv = cache
        elif cache is None:
            kv = self.project_kv(context, key_positions)
        else:
            new = heads_first(self.project_kv(context, query_positions))
            kv = CachedKeyValues(
                *(
                    jax.lax.dynamic_update_slice_in_dim(old, part, index, axis=2)
                    for old, part in zip(cache, new)
                )
            )
        keys = "bhtk" if isinstance(kv, CachedKeyValues) else "bthk"
        queries = self.query_proj(inputs).reshape(batch, query_len, self.num_heads, self.key_size)
        queries = self.scheme.rotate(queries, query_positions)
        logits = jnp.einsum(f"bqhk,{keys}->bhqt", queries, kv.keys) / np.sqrt(self.key_size)
        bias = self.scheme.score_bias(query_positions, key_positions, self.num_heads, self.causal)
        if bias is not None:
            logits = logits + bias
        logits = jnp.where(mask, self.scheme.scale_scores(logits, mask), NEG_INF)
        attn_weights = jax.nn.softmax(logits, axis=-1)
        attended = jnp.einsum(f"bhqt,{keys}->bqhk", attn_weights, kv.values)
        return self.out_proj(attended.reshape(batch, query_len, -1)), attn_weights, kv
