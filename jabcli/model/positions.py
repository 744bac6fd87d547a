"""Positional schemes: how the model knows where each token is (`model.pos_encoding`).

A scheme is a small object with up to six jobs, each with a do-nothing default:

- `vectors`: position vectors added to the token embeddings (sinusoidal, learned);
- `rotate`: queries and keys turned by their positions inside attention (rope);
- `score_bias`: a bias added to attention scores from query and key positions (alibi);
- `draw`: which positions a sequence reads (0, 1, 2, ... or a random draw);
- `cross_attention`: the scheme cross-attention uses (by default, none);
- `scale_scores`: attention scores scaled by how many keys a query sees (`LengthScaled`).

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

- `distance`: no position vectors; every self-attention score falls by 1 per position
  of distance, plus a learned bias per head for each offset within 4 (which tells left
  from right). Attention is local and depends on offsets only, so it means the same at
  every length; a model can still reach far through content (cross-attention, or the
  index hints of `task.index_hints`), which is what it is for. As the decoder's scheme,
  it gives cross-attention scores scaled by the log of the source's length
  (`LengthScaled`), so that such a content match stays sharp on long inputs.
- `none`: no positional information ("NoPE"). On the decoder side the causal mask
  still lets a model count; on the encoder side the source is a bag of symbols, which
  is all sort needs.
- `coupled`: position coupling (Cho et al. 2024). The task says which input symbol each
  answer step reads (`Task.alignment`); the source token and the answer step get the
  same position, first + s + index. <eos>, `+` and the step that writes <eos> share
  position 0, far below every data position (which start at 2: most-significant-first
  addition may ask for index -1; s is half of what `model.max_positions` leaves).
  Positions act only through attention: every attention adds -|query position - key
  position| to its scores, plus a learned bias per head for small offsets (`Distance`).
  Cross-attention reads the input symbol aligned with each answer step and its
  neighbours, self-attention looks at neighbours, and as only differences between
  positions reach the model, nothing it computes depends on the length.
- `coupled_sinusoidal`: the same coupled positions and attention biases, and also
  sinusoidal vectors at those positions, added to the token embeddings as in the paper,
  with s drawn at random per sequence from [16, what max_positions leaves] (as
  `randomized` draws, in training and at evaluation alike) so that every position a
  long input reaches was trained, and no symbol sits within 16 of <eos>'s 0. Kept to
  compare with `coupled` (README, Length generalization).

Except for the coupled schemes, cross-attention compares a target position with a source
position that carry no common origin, so it is left without positions.

`model.src_pos_encoding` and `model.tgt_pos_encoding` choose a scheme per side
(`model.pos_encoding` sets both); `coupled` is both sides or neither.

Positions are integer arrays [B, T] drawn once and passed to the model, so every
scheme reads the same positions during training, full decoding and cached decoding.

A new scheme is one subclass here and one entry in SCHEMES.
"""

from __future__ import annotations

import contextlib
import functools
from contextvars import ContextVar
from typing import TYPE_CHECKING

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from jabcli.core.errors import JabError
from jabcli.core.settings import is_code
from jabcli.core.tokenizer import PAD_ID
from jabcli.model.position_arrays import (  # noqa: F401  (importable from here, as before)
    alibi_bias,
    alibi_slopes,
    counting,
    randomized_positions,
    rope,
    sinusoidal_encoding,
)
from jabcli.tasks import derived
from jabcli.tasks.hinted import Hinted

if TYPE_CHECKING:
    from jabcli.tasks.contract import Task


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

    def scale_scores(self, logits: jax.Array, mask: jax.Array) -> jax.Array:
        """Attention scores [B, H, Tq, Tk] as the scheme scales them; `mask` (broadcast
        to the scores' shape) says which keys each query may see."""
        return logits

    def draw(self, key: jax.Array, counts: jax.Array, width: int, max_positions: int) -> jax.Array:
        """[B, width] positions for rows that need `counts[b]` of them: 0, 1, 2, ..."""
        return counting(counts.shape[0], width)

    def check_pair(self, other: PositionalScheme, task: Task) -> None:
        """Raise a JabError when this scheme cannot work with `other` on the model's
        other side, or with `task` (both sides are asked)."""

    def positions_needed(self, needed: int) -> int:
        """Positions a sequence takes under this scheme when its longer side (source or
        answer, with its <eos>) is `needed` tokens long."""
        return needed

    def pair_positions(
        self,
        key: jax.Array,
        source_scheme: PositionalScheme,
        task: Task,
        src: jax.Array,
        tgt_len: int,
        max_positions: int,
    ) -> tuple[jax.Array, jax.Array]:
        """The positions the model reads for sources [B, S] and answers [B, tgt_len],
        asked of the decoder's scheme: by default each side draws its own (`draw`).

        A randomized draw takes, per sequence, as many as its source needs (its tokens +
        <eos>) and as many as the longest answer that source can have: never the actual
        answer's length, which would tell the decoder when to stop.
        """
        if max(src.shape[1], tgt_len) > max_positions:  # static shapes: checked while tracing
            raise JabError(
                f"sequences of {max(src.shape[1], tgt_len)} tokens do not fit "
                f"model.max_positions = {max_positions}"
            )
        src_counts = jnp.sum(src != PAD_ID, axis=1)
        tgt_counts = jnp.minimum(derived.answer_slots(task, src), max_positions)
        # Wide enough for every row's whole draw, which is then cut to tgt_len.
        wide = min(max(tgt_len, derived.answer_width_for(task, src.shape[1])), max_positions)
        src_key, tgt_key = jax.random.split(key)
        return (
            source_scheme.draw(src_key, src_counts, src.shape[1], max_positions),
            self.draw(tgt_key, tgt_counts, wide, max_positions)[:, :tgt_len],
        )

    def cross_attention(self) -> PositionalScheme:
        """The scheme of cross-attention, between answer steps and source tokens."""
        return CONTENT_ONLY


class NoPositions(PositionalScheme):
    name = "none"


CONTENT_ONLY = NoPositions()


class LengthScaled(NoPositions):
    """Cross-attention beside `distance`: no positions, and scores multiplied by
    log(n) / log(17) for a query that sees n keys (Scalable-Softmax, Nakanishi 2025).
    Without it, a key that matches a query by content gets a smaller share of attention
    the more keys there are: an input twice as long as any trained on blurs what is
    read. With it, the match stands out as much among a hundred keys as among 17."""

    name = "length_scaled"
    neutral = 17  # keys at which scores are unchanged: a source of 16 symbols and <eos>

    def scale_scores(self, logits, mask):
        keys = jnp.sum(jnp.broadcast_to(mask, logits.shape), axis=-1, keepdims=True)
        return logits * (jnp.log(jnp.maximum(keys, 2)) / np.log(self.neutral))


LENGTH_SCALED = LengthScaled()


class Sinusoidal(PositionalScheme):
    name = "sinusoidal"

    def make_vectors(self, max_positions, d_model):
        def vectors(positions):
            if _shapes_only.get():  # no values needed, so none computed
                table = jnp.zeros((max_positions, d_model), jnp.float32)
            else:
                table = jnp.asarray(sinusoidal_encoding(max_positions, d_model))
            return jnp.take(table, positions, axis=0)

        return vectors


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


class Distance(PositionalScheme):
    """Scores fall by 1 per position of distance, plus a learned bias per head for each
    offset within `window`: between coupled positions, so that one head can read the
    aligned symbol and another its neighbour (a carry); on its own, as self-attention
    that looks at neighbours. The bias depends on offsets only: it means the same at
    every length."""

    name = "distance"
    window = 4

    def cross_attention(self):
        return LENGTH_SCALED

    def score_bias(self, query_positions, key_positions, num_heads, causal):
        shape = (num_heads, 2 * self.window + 1)
        learned = hk.get_parameter("offset_bias", shape, init=jnp.zeros)
        return distance_bias(query_positions, key_positions, learned)


def distance_bias(
    query_positions: jax.Array, key_positions: jax.Array, learned: jax.Array
) -> jax.Array:
    """[B, H, Tq, Tk] score biases -|query position - key position|, plus learned[h, offset
    + W] for offsets within W = (learned.shape[1] - 1) / 2 of each other."""
    window = (learned.shape[1] - 1) // 2
    offset = query_positions[:, :, None] - key_positions[:, None, :]  # [B, Tq, Tk]
    near = jnp.take(learned, jnp.clip(offset, -window, window) + window, axis=1)
    near = jnp.where(jnp.abs(offset) <= window, near, 0.0).transpose(1, 0, 2, 3)
    return near - jnp.abs(offset).astype(jnp.float32)[:, None]


DISTANCE = Distance()


class Coupled(Distance):
    """Positions from the task's alignment, on both sides at once; every attention,
    self-attention too, biased by distance (so what a step attends to is the same at any
    length)."""

    name = "coupled"
    first = 2  # data positions start here; 0 is <eos> and separators, 1 is index -1

    def cross_attention(self):
        return DISTANCE

    def check_pair(self, other, task):
        if other is not self:
            raise JabError(
                f"coupled positions couple the two sides: set model.pos_encoding={self.name}, "
                "not one side's encoding"
            )
        if isinstance(task, Hinted):
            raise JabError(
                "task.index_hints and coupled positions cannot be combined: coupling gives "
                "the model the alignment that hints make it find"
            )
        if not derived.aligned(task):
            from jabcli.tasks.registry import TASKS

            aligned = [
                name
                for name, cls in TASKS.items()
                if derived.aligned(cls(tokenizer=task.tokenizer))
            ]
            worked = [name for name, cls in TASKS.items() if "scratchpad" in cls.options()]
            raise JabError(
                f"task {task.label} does not say which input symbol each answer symbol reads, "
                f"so it cannot use coupled positions; tasks that do: {', '.join(aligned)}; "
                f"with task.scratchpad=true: {', '.join(worked)}"
            )

    def pair_positions(self, key, source_scheme, task, src, tgt_len, max_positions):
        """Both sides from the task's alignment, known from the source alone."""
        source, answer = derived.alignment(task, src, tgt_len)
        return self.couple(key, source, answer, max_positions)

    def couple(
        self, key: jax.Array, source: jax.Array, answer: jax.Array, max_positions: int
    ) -> tuple[jax.Array, jax.Array]:
        """Alignment indices ([B, S], [B, T]; see derived.alignment) -> positions: 0 where
        unaligned, else first + s + index, with s (`start`) half of the room
        max_positions leaves: far enough from 0 that no data position attends to <eos>
        or a separator. `key` draws s where a subclass draws it."""
        span = jnp.maximum(jnp.max(source, axis=1), jnp.max(answer, axis=1)) + 1
        start = self.start(key, jnp.maximum(max_positions - self.first - span, 0))

        def place(index):
            return jnp.where(index < -1, 0, self.first + start[:, None] + index).astype(jnp.int32)

        return place(source), place(answer)

    def start(self, key: jax.Array, room: jax.Array) -> jax.Array:
        """s per sequence [B], given the room [B] its positions leave."""
        return room // 2

    def positions_needed(self, needed):
        # Alignment indices run up to the longest answer (and its <eos> step) or source.
        return self.first + needed


class CoupledSinusoidal(Coupled):
    name = "coupled_sinusoidal"
    make_vectors = Sinusoidal.make_vectors
    margin = 16  # s >= this: attention from a symbol to <eos> pays a distance of 16 or more

    def start(self, key, room):
        return jax.random.randint(key, room.shape, self.margin, jnp.maximum(room, self.margin) + 1)

    def positions_needed(self, needed):
        return super().positions_needed(needed) + self.margin


SCHEMES: dict[str, PositionalScheme] = {
    scheme.name: scheme
    for scheme in (
        Sinusoidal(),
        Learned(),
        Rope(),
        Alibi(),
        Randomized(),
        DISTANCE,
        CONTENT_ONLY,
        Coupled(),
        CoupledSinusoidal(),
    )
}


def get_scheme(name: str, key: str = "model.pos_encoding") -> PositionalScheme:
    """The scheme `name` names: one of SCHEMES, or a class in the user's own code
    (PATH.py:Class, package.module:Class) that subclasses PositionalScheme."""
    if is_code(name) or (name not in SCHEMES and installed(name)):
        return user_scheme(name, key)
    if name not in SCHEMES:
        raise JabError(
            f"{key} must be one of {', '.join(SCHEMES)} or PATH.py:Class for your own, got {name!r}"
        )
    return SCHEMES[name]


def installed(name: str) -> bool:
    """Whether an installed package registers a scheme called `name` (entry points)."""
    from jabcli.tasks import user_code

    return name in user_code.entry_points(user_code.SCHEME_ENTRY_POINTS)


def user_scheme(name: str, key: str) -> PositionalScheme:
    """A scheme of the user's own (in a file, a module, or an installed package's entry
    point), loaded once a process for each version of its file, and checked against the
    contract."""
    from jabcli.tasks import user_code

    return loaded_scheme(name, key, user_code.version(name))


@functools.cache
def loaded_scheme(name: str, key: str, version: str) -> PositionalScheme:
    from jabcli.tasks import user_code

    if is_code(name):
        found = user_code.from_code(name, key)
    else:
        found = user_code.from_entry_point(user_code.SCHEME_ENTRY_POINTS, name)
    if not (isinstance(found, type) and issubclass(found, PositionalScheme)):
        raise JabError(f"{key}={name} is not a positional scheme: subclass jabcli.PositionalScheme")
    if not found.name:
        raise JabError(f"{key}={name} does not define name (see jabcli.PositionalScheme)")
    try:
        return found()
    except Exception as err:
        raise user_code.UserCodeError(f"{name}()", err, user_code.user_files(err)) from None


_shapes_only: ContextVar[bool] = ContextVar("shapes_only", default=False)


@contextlib.contextmanager
def shapes_only():
    """Within it, a model traced for its shapes alone (`jax.eval_shape`) computes no
    sinusoidal table: a model too big to train is refused before its table, which for a
    d_model of a million alone takes gigabytes and seconds, is made."""
    token = _shapes_only.set(True)
    try:
        yield
    finally:
        _shapes_only.reset(token)
