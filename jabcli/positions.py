"""Positional schemes: how the model knows where each token is (`model.pos_encoding`).

A scheme is a small object with up to four jobs, each with a do-nothing default:

- `vectors`: position vectors added to the token embeddings (sinusoidal, learned);
- `rotate`: queries and keys turned by their positions inside attention (rope);
- `score_bias`: a bias added to attention scores from query and key positions (alibi);
- `draw`: which positions a sequence reads (0, 1, 2, ... or a random draw).

The schemes:

- `sinusoidal`: the paper's fixed sin/cos vectors, added to the token embeddings.
- `learned`: a trained vector per position, added the same way; positions never seen
  in training keep their random initial vectors.
- `rope`: rotary embeddings (Su et al. 2021). Queries and keys of self-attention are
  rotated by an angle proportional to their position, so their scores depend only on
  the offset between positions.
- `alibi`: no position vectors; self-attention scores get a penalty growing linearly
  with distance, with one slope per head (Press et al. 2022). In the bidirectional
  encoder, keys to the left of the query are penalized half a position less than keys
  to the right, as in DeepMind's neural_networks_chomsky_hierarchy: with a symmetric
  penalty the encoder could tell left from right only through `<eos>`.
- `randomized`: sinusoidal vectors at positions drawn at random, sorted, from
  [0, model.max_positions), at training and at evaluation (Ruoss et al. 2023). How
  many positions a sequence draws depends only on its source (`Experiment.positions`),
  never on the answer's actual length, which the causal decoder must not be told.

rope and alibi act inside self-attention only: cross-attention compares a target
position with a source position, which carry no common origin.

Positions are integer arrays [B, T] drawn once and passed to the model, so every
scheme reads the same positions during training, full decoding and cached decoding.

A new scheme is one subclass here and one entry in SCHEMES.
"""

from __future__ import annotations

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from jabcli.errors import JabError


class PositionalScheme:
    """No positional information at all; subclasses add what their scheme does."""

    name = ""

    def check(self, d_model: int, num_heads: int) -> None:
        """Raise a JabError when the model's shape does not suit this scheme."""

    def make_vectors(self, max_positions: int, d_model: int):
        """A callable positions [B, T] -> [B, T, D] to add to token embeddings, or None.

        Called while the model is built, so a learned table becomes a model parameter."""
        return None

    def rotate(self, x: jax.Array, positions: jax.Array) -> jax.Array:
        """Queries or keys [B, T, H, K] at positions [B, T], as attention should see them."""
        return x

    def score_bias(
        self, query_positions: jax.Array, key_positions: jax.Array, num_heads: int, causal: bool
    ) -> jax.Array | None:
        """[B, H, Tq, Tk] added to attention scores, or None."""
        return None

    def draw(self, key: jax.Array, counts: jax.Array, width: int, max_positions: int) -> jax.Array:
        """[B, width] positions for rows that need `counts[b]` of them: 0, 1, 2, ..."""
        return counting(counts.shape[0], width)


class Sinusoidal(PositionalScheme):
    name = "sinusoidal"

    def make_vectors(self, max_positions, d_model):
        table = sinusoidal_encoding(max_positions, d_model)
        return lambda positions: jnp.take(jnp.asarray(table), positions, axis=0)


class Learned(PositionalScheme):
    name = "learned"

    def make_vectors(self, max_positions, d_model):
        return hk.Embed(
            max_positions,
            d_model,
            name="position_embed",
            w_init=hk.initializers.TruncatedNormal(0.5),
        )


class Rope(PositionalScheme):
    name = "rope"

    def check(self, d_model, num_heads):
        if (d_model // num_heads) % 2:
            raise JabError(
                f"rope rotates pairs of dimensions: model.d_model / model.num_heads "
                f"({d_model} / {num_heads}) must be even"
            )

    def rotate(self, x, positions):
        return rope(x, positions)


class Alibi(PositionalScheme):
    name = "alibi"

    def score_bias(self, query_positions, key_positions, num_heads, causal):
        return alibi_bias(query_positions, key_positions, num_heads, causal)


class Randomized(Sinusoidal):
    name = "randomized"

    def draw(self, key, counts, width, max_positions):
        return randomized_positions(key, counts, width, max_positions)


SCHEMES: dict[str, PositionalScheme] = {
    scheme.name: scheme for scheme in (Sinusoidal(), Learned(), Rope(), Alibi(), Randomized())
}


def get_scheme(name: str) -> PositionalScheme:
    if name not in SCHEMES:
        raise JabError(f"model.pos_encoding must be one of {', '.join(SCHEMES)}, got {name!r}")
    return SCHEMES[name]


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
