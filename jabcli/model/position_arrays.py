"""The arrays positional schemes are made of (positions.py): sinusoidal tables, positions
counted or drawn at random, rotary turns and ALiBi's score penalties. Plain functions of
shapes and positions, with no parameters."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np


@functools.lru_cache(maxsize=2)
def sinusoidal_encoding(length: int, d_model: int) -> np.ndarray:
    """[length, d_model]: PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(same angle).
    Computed once per size (read-only), when a model is first traced to compute: the
    encoder, the decoder and every trace share it."""
    positions = np.arange(length)[:, None]
    frequencies = 10000.0 ** (-np.arange(0, d_model, 2) / d_model)
    encoding = np.zeros((length, d_model), np.float32)
    encoding[:, 0::2] = np.sin(positions * frequencies)
    encoding[:, 1::2] = np.cos(positions * frequencies[: d_model // 2])
    encoding.flags.writeable = False
    return encoding


def counting(batch: int, width: int) -> jax.Array:
    """[batch, width] positions 0, 1, ..., width - 1."""
    return jnp.broadcast_to(jnp.arange(width, dtype=jnp.int32), (batch, width))


def randomized_positions(
    key: jax.Array, counts: jax.Array, width: int, max_positions: int
) -> jax.Array:
    """[B, width]: row b holds counts[b] distinct positions from [0, max_positions), sorted,
    then max_positions - 1 in its remaining slots.

    A row's draw depends only on the key, its row number and its count: not on the
    other rows, nor on how wide the batch is.
    """
    row_keys = jax.vmap(lambda row: jax.random.fold_in(key, row))(jnp.arange(counts.shape[0]))
    scores = jax.vmap(lambda k: jax.random.uniform(k, (max_positions,)))(row_keys)
    # The c lowest-scoring positions are a uniform random c-subset, whatever `width` is.
    _, lowest = jax.lax.top_k(-scores, width)
    chosen = jnp.where(jnp.arange(width) < counts[:, None], lowest, max_positions - 1)
    return jnp.sort(chosen, axis=1).astype(jnp.int32)


def rope(x: jax.Array, positions: jax.Array) -> jax.Array:
    """Rotate [B, T, H, K] queries or keys by their positions [B, T]: pairs (x_i, x_{i+K/2})
    turn by position * 10000^(-2i/K)."""
    half = x.shape[-1] // 2
    frequencies = 10000.0 ** (-jnp.arange(half, dtype=jnp.float32) * 2 / x.shape[-1])
    angles = positions[:, :, None, None].astype(jnp.float32) * frequencies  # [B, T, 1, K/2]
    cos, sin = jnp.cos(angles), jnp.sin(angles)
    first, second = x[..., :half], x[..., half:]
    return jnp.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)


def alibi_slopes(num_heads: int) -> np.ndarray:
    """[H] the geometric slopes 2^(-8/H), 2^(-16/H), ..., 2^(-8)."""
    return 2.0 ** (-8.0 * np.arange(1, num_heads + 1) / num_heads)


def alibi_bias(
    query_positions: jax.Array, key_positions: jax.Array, num_heads: int, causal: bool = True
) -> jax.Array:
    """[B, H, Tq, Tk] score penalties -slope_h * |query position - key position|.

    Without a causal mask a key can lie on either side of the query; keys to its left
    are then penalized by half a position less, so the two sides differ."""
    offset = query_positions[:, :, None] - key_positions[:, None, :]
    distance = jnp.abs(offset).astype(jnp.float32)
    if not causal:
        distance = distance - 0.5 * (offset > 0)
    slopes = jnp.asarray(alibi_slopes(num_heads), jnp.float32)
    return -slopes[None, :, None, None] * distance[:, None]
