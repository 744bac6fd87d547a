"""A decoder-only (GPT-style) Transformer (`model.arch=decoder`): one causal sequence per
example, the input and then the answer.

The sequence is the source as it is [B, S] (its symbols, its <eos>, which separates the
input from the answer, and the row's padding), then the answer fed back, tgt_in [B, T]
(<bos>, then the answer's tokens). Every token attends to those before it, padding
never; the output at tgt_in's column j predicts the answer's token j, so the forward
pass returns logits [B, T, V] that tgt_out scores, and training, scoring and evaluation
need no branch. The loss is on the answer alone.

The source keeps its padding in the middle of the sequence: every row's answer then
starts at column S, so decoding writes step i's keys and values at column S + i of the
key/value cache in every row at once. Padding is masked as a key (segment id 0) and
positions are the scheme's, never the column's, so this reads as if the answer followed
the input's last token directly.

Decoding is token by token with that cache (`decode.greedy_decode` as it is): `encode`
is the source itself, `init_cache` runs the layers over it once (the prefill), writing
its keys and values, and `decode_step` appends one answer token.

Positions: one count over the whole sequence for a scheme that does not pair the two
sides (the encoder form's `slot_positions`: the answer continues the source, and how many
positions a sequence draws depends on its source alone, never on its answer's length);
for `coupled` and `coupled_sinusoidal`, the task's alignment (`pair_positions`): the
step that writes an answer symbol is at the position of the input symbol it reads
(Cho et al. 2024, who couple positions in a decoder-only model), and the scheme's
distance bias acts on the one self-attention.

With model.answer_embedding, every answer token (the columns from S on: <bos> and the
answer fed back) also carries one learned vector, so that the model tells the answer from
the input by what a token carries; without positions it could otherwise tell only by
attending to the <eos> and <bos> between them, a signal that thins as inputs grow longer.

The layers are the encoder-decoder's decoder layers without cross-attention (model.py),
with its embedding, model.loops, dropout and pre/post norm. Shapes: B batch, S source
width, T answer width, N = S + T, V vocabulary.
"""

from __future__ import annotations

import haiku as hk
import jax
import jax.numpy as jnp

from jabcli.core.errors import JabError
from jabcli.core.settings import ModelConfig
from jabcli.core.tokenizer import PAD_ID
from jabcli.model.contract import Form, ModelFns, layer_bytes, pairs, side_schemes
from jabcli.model.encoder_only import slot_positions
from jabcli.model.layers import LayerCache
from jabcli.model.model import Attention, Transformer
from jabcli.model.positions import PositionalScheme, counting
from jabcli.tasks.contract import Task


def sequence_segments(ids: jax.Array, segments: jax.Array | None) -> jax.Array:
    """Segment ids [B, W] of one side: packed rows' own (1, 2, 0 for padding), else 1 for
    every token and 0 for padding."""
    return (ids != PAD_ID).astype(jnp.int32) if segments is None else segments


class DecoderOnly(hk.Module):
    """Source and answer through one causal stack: src [B, S] and tgt_in [B, T] ->
    (logits [B, T, V] of the answer's tokens, `Attention` whose `decoder` is the causal
    self-attention over the whole sequence [layers, B, H, N, N]; it has no encoder or
    cross-attention)."""

    def __init__(
        self,
        cfg: ModelConfig,
        scheme: PositionalScheme,
        vocab_size: int,
        name: str | None = "decoder_only",
    ):
        super().__init__(name=name)
        # The encoder-decoder's embedding, decoder layers (without cross-attention) and
        # output layer; its encoder is never called, so it has no parameters.
        self.transformer = Transformer(cfg, scheme, scheme, vocab_size, cross=False)

    def answer_from(self, src: jax.Array) -> int | None:
        """The column the answer starts at, for model.answer_embedding's vector; None
        without it."""
        return src.shape[1] if self.transformer.cfg.answer_embedding else None

    def __call__(
        self,
        src: jax.Array,
        tgt_in: jax.Array,
        is_training: bool = False,
        src_positions: jax.Array | None = None,
        tgt_positions: jax.Array | None = None,
        src_segments: jax.Array | None = None,
        tgt_segments: jax.Array | None = None,
    ) -> tuple[jax.Array, Attention]:
        """Teacher-forced, as training and full decoding read it. Positions are given for
        both sides (`Decoder.positions`) or for neither: then the answer's continue the
        source's real tokens, 0, 1, 2, ..."""
        if src_positions is None:
            tokens = jnp.sum(src != PAD_ID, axis=1)[:, None]
            src_positions = counting(*src.shape)
            tgt_positions = tokens + counting(src.shape[0], tgt_in.shape[1])
        assert tgt_positions is not None, "positions are given for both sides or for neither"
        ids = jnp.concatenate([src, tgt_in], axis=1)
        positions = jnp.concatenate([src_positions, tgt_positions], axis=1)
        segments = jnp.concatenate(
            [sequence_segments(src, src_segments), sequence_segments(tgt_in, tgt_segments)],
            axis=1,
        )
        logits, weights, _, _ = self.transformer.decode(
            ids,
            None,
            None,
            positions,
            is_training=is_training,
            segments=segments,
            answer_from=self.answer_from(src),
        )
        return logits[:, src.shape[1] :], Attention(None, weights, None)

    def init_cache(
        self, src: jax.Array, src_positions: jax.Array, max_out: int
    ) -> list[LayerCache]:
        """The prefill: the source's keys and values in caches [B, H, S + max_out, K] of
        every layer (and pass), the answer's columns still empty. The answer's positions
        are not known here, nor needed: its keys are every source query's future."""
        batch, width = src.shape
        caches = [
            LayerCache(self.transformer.empty_cache(batch, width + max_out), None)
            for _ in self.transformer.decoder_layers
        ]
        unread = jnp.zeros((batch, max_out), jnp.int32)  # the answer's positions
        positions = jnp.concatenate([src_positions, unread], axis=1)
        answer = jnp.ones((batch, max_out), jnp.int32)  # the answer's segment, to come
        segments = jnp.concatenate([sequence_segments(src, None), answer], axis=1)
        _, _, _, caches = self.transformer.decode(
            src,
            None,
            None,
            positions,
            cache=caches,
            segments=segments,
            answer_from=self.answer_from(src),
        )
        return caches

    def decode_step(
        self,
        token: jax.Array,
        index: jax.Array,
        cache: list[LayerCache],
        src: jax.Array,
        tgt_positions: jax.Array,
        src_positions: jax.Array,
    ) -> tuple[jax.Array, list[LayerCache]]:
        """token [B], the answer's token `index` (<bos> first) -> (logits [B, V] of the
        next, the cache with its keys and values at column S + index)."""
        positions = jnp.concatenate([src_positions, tgt_positions], axis=1)
        answer = jnp.ones(tgt_positions.shape, jnp.int32)
        segments = jnp.concatenate([sequence_segments(src, None), answer], axis=1)
        logits, _, _, cache = self.transformer.decode(
            token[:, None],
            None,
            None,
            positions,
            cache=cache,
            index=src.shape[1] + index,
            segments=segments,
            answer_from=self.answer_from(src),
        )
        return logits[:, 0], cache


def build(m: ModelConfig, scheme: PositionalScheme, vocab_size: int) -> ModelFns:
    """Haiku-transform the model; every entry point shares the same parameters."""

    def fns():
        model = DecoderOnly(m, scheme, vocab_size)

        def init(src, tgt_in):
            return model(src, tgt_in, is_training=True)

        def encode(src, positions=None):
            return src  # reading the source is filling the cache (`init_cache`)

        return init, (model.__call__, encode, model.init_cache, model.decode_step)

    transformed = hk.multi_transform(fns)
    return ModelFns(transformed.init, *transformed.apply)


class Decoder(Form):
    """`model.arch=decoder`: a decoder-only Transformer, the input then the answer in one
    causal sequence, answered token by token with a key/value cache; one positional
    scheme over the whole sequence, or coupled positions."""

    name = "decoder"
    packs = True
    attention = ("decoder",)
    prefixed = True
    marks_answer = True

    def schemes(self, m: ModelConfig, task: Task) -> tuple[PositionalScheme, PositionalScheme]:
        """One scheme: model.pos_encoding, or the one both sides' keys name."""
        src, tgt = side_schemes(m)
        if src is not tgt:
            raise JabError(
                f"model.arch={self.name} reads the input and the answer as one sequence, with "
                f"one positional scheme: set model.pos_encoding, not {src.name} for the input "
                f"and {tgt.name} for the answer"
            )
        src.check(m.d_model, m.num_heads)
        src.check_pair(src, task)
        return src, src

    def build(self, m, src_scheme, tgt_scheme, vocab_size, task) -> ModelFns:
        return build(m, src_scheme, vocab_size)

    def positions_needed(self, src_scheme, tgt_scheme, source: int, answer: int) -> int:
        """Coupled positions number both sides alike (the longer one's); any other scheme
        counts the whole sequence."""
        if pairs(src_scheme):
            return src_scheme.positions_needed(max(source, answer))
        return src_scheme.positions_needed(source + answer)

    def positions(self, key, src_scheme, tgt_scheme, task, src, answer_width, limit):
        if pairs(src_scheme):
            return src_scheme.pair_positions(key, src_scheme, task, src, answer_width, limit)
        return slot_positions(key, src_scheme, task, src, answer_width, limit)

    def decode_bytes(self, m: ModelConfig, src_width: int, answer_width: int) -> int:
        """The prefill's attention scores and activations (one layer at a time) and every
        layer's cached keys and values of the whole sequence, twice (the loop's copy)."""
        s, n = src_width, src_width + answer_width
        cache = 2 * m.num_layers * m.loops * n * m.d_model
        return layer_bytes(m, s, n) + 4 * 2 * cache
