"""Positional encodings: how the model knows where each token is (`model.pos_encoding`).

- `sinusoidal`: the paper's fixed sin/cos vectors, added to the token embeddings.
- `learned`: a trained vector per position, added the same way; positions never seen
  in training keep their random initial vectors.
- `rope`: rotary embeddings (Su et al. 2021). Queries and keys of self-attention are
  rotated by an angle proportional to their position, so their scores depend only on
  the offset between positions.
- `alibi`: no position vectors; self-attention scores get a penalty growing linearly
  with distance, with one slope per head (Press et al. 2022).
- `randomized`: sinusoidal vectors at positions drawn at random, sorted, from
  [0, model.max_positions), at training and at evaluation (Ruoss et al. 2023). How
  many positions a sequence draws depends only on its source: source length + 1 for
  the encoder and the longest answer that source can have for the decoder
  (`Setup.positions`), never the answer's actual length, which the causal decoder
  must not be told. A sequence draws the same way in any batch, of any width.
  Source and target draw separately; cross-attention sees only content.

rope and alibi act inside self-attention only: cross-attention compares a target
position with a source position, which carry no common origin.

Positions are integer arrays [B, T] made by `draw` and passed to the model, so every
encoding reads the same positions during training, full decoding and incremental
decoding.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

ENCODINGS = ("sinusoidal", "learned", "rope", "alibi", "randomized")
ADDED = ("sinusoidal", "learned", "randomized")  # vectors added to the token embeddings
IN_ATTENTION = ("rope", "alibi")  # act on self-attention scores instead


def sinusoidal_encoding(length: int, d_model: int) -> np.ndarray:
    """[length, d_model]: PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(same angle)."""
    positions = np.arange(length)[:, None]
    frequencies = 10000.0 ** (-np.arange(0, d_model, 2) / d_model)
    encoding = np.zeros((length, d_model), np.float32)
    encoding[:, 0::2] = np.sin(positions * frequencies)
    encoding[:, 1::2] = np.cos(positions * frequencies[: d_model // 2])
    return encoding


def counting(batch: int, width: int) -> jax.Array:
    """[batch, width] positions 0, 1, ..., width - 1."""
    return jnp.broadcast_to(jnp.arange(width, dtype=jnp.int32), (batch, width))


def draw(
    encoding: str, max_positions: int, key: jax.Array, counts: jax.Array, width: int
) -> jax.Array:
    """[B, width] positions: 0, 1, ... or, for `randomized`, a sorted random draw of
    `counts[b]` positions for row b (see `randomized_positions`)."""
    if encoding != "randomized":
        return counting(counts.shape[0], width)
    return randomized_positions(key, counts, width, max_positions)


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


def alibi_bias(query_positions: jax.Array, key_positions: jax.Array, num_heads: int) -> jax.Array:
    """[B, H, Tq, Tk] score penalties -slope_h * |query position - key position|."""
    distance = jnp.abs(query_positions[:, :, None] - key_positions[:, None, :])
    slopes = jnp.asarray(alibi_slopes(num_heads), jnp.float32)
    return -slopes[None, :, None, None] * distance[:, None].astype(jnp.float32)
