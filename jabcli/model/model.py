"""The encoder-decoder Transformer of "Attention Is All You Need", in Haiku.

The whole model, built of the two layer kinds (layers.py), which are built of attention
(attention.py). How positions enter is the positional scheme's business (positions.py):
the model only asks it for vectors, rotations and score biases. Shapes use
B = batch, S = source time, T = target time, D = d_model, H = heads, K = D / H.

The decoder has one path. Given a key/value cache and the index of the first target
token it reads, it writes that token's keys and values into the cache and attends to
everything before it: that is incremental decoding. Without a cache it attends over
the target it is given: that is training and full decoding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from jabcli.core.settings import ModelConfig
from jabcli.model.attention import (
    CachedKeyValues,
    answer_columns,
    causal_mask,
    heads_first,
    padding_mask,
    segment_mask,
)
from jabcli.model.contract import Form, ModelFns, layer_bytes, side_schemes
from jabcli.model.layers import DecoderLayer, EncoderLayer, LayerCache
from jabcli.model.positions import PositionalScheme, counting
from jabcli.tasks.contract import Task


class Attention(NamedTuple):
    """Attention weights of every layer, each [layers, B, H, Tq, Tk] (None: an attention
    the form lacks)."""

    encoder: jax.Array | None
    decoder: jax.Array | None
    cross: jax.Array | None


def position_vectors(cfg: ModelConfig, scheme: PositionalScheme):
    """The scheme's position vectors (`make_vectors`), or None. Counted down
    (model.count_positions, the paper's), a sequence of max_positions tokens reaches
    position max_positions, and the vectors are laid out as the paper's code lays
    them, `[sin | cos]` halves rather than interleaved: the same numbers, the dimensions
    in another order."""
    if cfg.count_positions == "up":
        return scheme.make_vectors(cfg.max_positions, cfg.d_model)
    vectors = scheme.make_vectors(cfg.max_positions + 1, cfg.d_model)
    if vectors is None:
        return None
    return lambda positions: halves(vectors(positions))


def halves(x: jax.Array) -> jax.Array:
    """[..., D] with its even dimensions first, then its odd ones."""
    return jnp.concatenate([x[..., 0::2], x[..., 1::2]], axis=-1)


class Transformer(hk.Module):
    """Token ids in, next-token logits out: src [B, S], tgt_in [B, T] -> [B, T, vocab].

    The encoder follows `src_scheme`, the decoder `tgt_scheme` (which also chooses how
    cross-attention sees positions)."""

    def __init__(
        self,
        cfg: ModelConfig,
        src_scheme: PositionalScheme,
        tgt_scheme: PositionalScheme,
        vocab_size: int,
        cross: bool = True,
        name: str | None = "transformer",
    ):
        super().__init__(name=name)
        self.cfg = cfg
        self.cross = cross  # whether the decoder attends to the encoder (False: decoder-only)
        # Initialised at 1/sqrt(D) so that, once scaled by sqrt(D), token embeddings are about
        # as large as the positional encoding instead of drowning it out (model.embedding_init
        # sets another spread: the paper's 0.02 leaves them six times weaker).
        self.embed = hk.Embed(
            vocab_size,
            cfg.d_model,
            name="embed",
            w_init=hk.initializers.TruncatedNormal(cfg.embedding_init or cfg.d_model**-0.5),
        )
        # With model.loops > 1 the layers run loops times over, one weight set for every
        # pass (a Universal Transformer's weight sharing, Dehghani et al. 2019): as deep
        # a computation, no more parameters (`passes`). Each pass of a decoder layer keeps
        # its own self-attention cache, as it attends to its own inputs.
        self.encoder_layers = [
            EncoderLayer(cfg, src_scheme, name=f"encoder_{i}") for i in range(cfg.num_layers)
        ]
        self.decoder_layers = [
            DecoderLayer(cfg, tgt_scheme, cross, name=f"decoder_{i}") for i in range(cfg.num_layers)
        ]
        # One table when both sides share a scheme (a learned one is then shared too).
        self.src_vectors = position_vectors(cfg, src_scheme)
        self.tgt_vectors = (
            self.src_vectors if tgt_scheme is src_scheme else position_vectors(cfg, tgt_scheme)
        )
        self.final_norms = [
            hk.LayerNorm(-1, True, True, name=f"{side}_final_norm")
            for side in ("encoder", "decoder")
        ]
        self.to_logits = hk.Linear(vocab_size, name="to_logits")

    def passes(self, one_pass: Callable, x: jax.Array, per_pass=None):
        """Runs `one_pass(x, per_pass) -> (x, outputs)`, one pass through a side's layers,
        model.loops times: with one pass, its outputs as they are; with more, a loop
        (`hk.scan`, over `per_pass` [loops, ...] when given) whose outputs gain a leading
        [loops] axis. Not unrolled, so compiling takes as long for 32 passes as for 2."""
        if self.cfg.loops == 1:
            return one_pass(x, per_pass)
        return hk.scan(one_pass, x, per_pass, length=self.cfg.loops)

    def by_layer(self, weights: jax.Array | None) -> jax.Array | None:
        """Attention weights [loops, layers, ...] of every pass -> [loops * layers, ...],
        a layer per pass, in the order they ran (None, an attention the model lacks, as is)."""
        if weights is None or self.cfg.loops == 1:
            return weights
        return weights.reshape(-1, *weights.shape[2:])

    def embed_tokens(
        self,
        ids: jax.Array,
        positions: jax.Array,
        vectors,
        is_training: bool,
        answer: jax.Array | None = None,
    ) -> jax.Array:
        """[B, T] ids at positions [B, T] -> [B, T, D] scaled embedding (+ position vectors,
        + one learned vector on the tokens that `answer` [T] marks, with
        model.answer_embedding)."""
        x = self.embed(ids) * np.sqrt(self.cfg.d_model)
        if vectors is not None:
            x = x + vectors(positions)
        if answer is not None:
            side = hk.get_parameter(
                "answer_embedding", [self.cfg.d_model], init=hk.initializers.TruncatedNormal()
            )
            x = x + answer[None, :, None] * side
        if is_training and self.cfg.dropout:
            x = hk.dropout(hk.next_rng_key(), self.cfg.dropout, x)
        return x

    def encode(
        self,
        src: jax.Array,
        positions: jax.Array | None = None,
        is_training: bool = False,
        segments: jax.Array | None = None,
    ) -> tuple[jax.Array, jax.Array | None]:
        """src [B, S] at positions [B, S] (default 0, 1, ...), with `segments` [B, S] when
        rows are packed -> (memory [B, S, D], encoder self-attention [layers, B, H, S, S],
        a layer per pass with model.loops)."""
        positions = counting(*src.shape) if positions is None else positions
        x = self.embed_tokens(src, positions, self.src_vectors, is_training)
        if segments is None:
            mask = padding_mask(src.shape[1], src)
        else:
            mask = segment_mask(segments, segments)

        def one_pass(x, _):
            all_weights = []
            for layer in self.encoder_layers:
                x, weights = layer(x, mask, positions, is_training)
                all_weights.append(weights)
            return x, jnp.stack(all_weights)

        x, weights = self.passes(one_pass, x)
        if self.cfg.norm == "pre":
            x = self.final_norms[0](x)
        return x, self.by_layer(weights)

    def decode(
        self,
        tgt_in: jax.Array,
        memory: jax.Array | None,
        src: jax.Array | None,
        positions: jax.Array | None = None,
        src_positions: jax.Array | None = None,
        is_training: bool = False,
        cache: list[LayerCache] | None = None,
        index: jax.Array | int = 0,
        segments: jax.Array | None = None,
        src_segments: jax.Array | None = None,
        answer_from: int | None = None,
    ):
        """tgt_in [B, Tq], the target tokens from index `index` on, over the encoder's
        memory [B, S, D]; `positions` [B, T] are the whole target's; `segments` [B, T]
        (the whole target's too) and `src_segments` say which example each token is of,
        in packed rows, and which are padding (0)
        -> (logits [B, Tq, V], self and cross weights, cache).

        Without cross-attention (`cross` False) there is no memory, source or cross
        weights: memory, src and src_positions are None, and so are the cross weights.

        The cache has a `LayerCache` per layer; with model.loops > 1 its self-attention
        keys and values are every pass's, [loops, B, H, T, K], and the encoder's, the same
        for every pass, are held once.

        Target padding only ever trails the target, so it is always in the future of a
        real query and the causal mask hides it; cached decoding then matches exactly.
        Padding elsewhere (a decoder-only model's source) is masked by `segments`.

        With `answer_from` (a decoder-only model's source width, with
        model.answer_embedding), the tokens from that column on are the answer's, and
        carry the answer's learned vector."""
        batch, query_len = tgt_in.shape
        positions = counting(batch, query_len) if positions is None else positions
        here = jax.lax.dynamic_slice_in_dim(positions, index, query_len, axis=1)
        answer = None if answer_from is None else answer_columns(index, query_len, answer_from)
        x = self.embed_tokens(tgt_in, here, self.tgt_vectors, is_training, answer)
        self_mask = causal_mask(query_len, positions.shape[1], index)
        if segments is not None:
            query_segments = jax.lax.dynamic_slice_in_dim(segments, index, query_len, axis=1)
            self_mask = self_mask & segment_mask(query_segments, segments)
        cross_mask = None
        if self.cross:
            assert src is not None, "cross-attention reads the source"
            src_positions = counting(*src.shape) if src_positions is None else src_positions
            if segments is None:
                cross_mask = padding_mask(query_len, src)
            else:  # training on packed rows: no cache, the whole target at once
                assert src_segments is not None, "packed rows pack both sides"
                cross_mask = segment_mask(query_segments, src_segments)

        def one_pass(x, self_kvs):
            self_weights, cross_weights, new_self_kvs = [], [], []
            for i, layer in enumerate(self.decoder_layers):
                layer_cache = None if cache is None else LayerCache(self_kvs[i], cache[i].cross_kv)
                x, sw, cw, layer_cache = layer(
                    x,
                    memory,
                    self_mask,
                    cross_mask,
                    here,
                    positions,
                    src_positions,
                    is_training,
                    layer_cache,
                    index,
                )
                self_weights.append(sw)
                cross_weights.append(cw)
                new_self_kvs.append(layer_cache.self_kv)
            # Without a cache the keys and values are not kept: a loop's outputs would be.
            kept = None if cache is None else new_self_kvs
            cross = jnp.stack(cross_weights) if self.cross else None
            return x, (jnp.stack(self_weights), cross, kept)

        self_kvs = None if cache is None else [layer_cache.self_kv for layer_cache in cache]
        x, (self_weights, cross_weights, self_kvs) = self.passes(one_pass, x, self_kvs)
        new_cache = None
        if cache is not None:
            new_cache = [LayerCache(kv, old.cross_kv) for kv, old in zip(self_kvs, cache)]
        if self.cfg.norm == "pre":
            x = self.final_norms[1](x)
        logits = self.to_logits(x)
        return logits, self.by_layer(self_weights), self.by_layer(cross_weights), new_cache

    def __call__(
        self,
        src,
        tgt_in,
        is_training: bool = False,
        src_positions=None,
        tgt_positions=None,
        src_segments=None,
        tgt_segments=None,
    ) -> tuple[jax.Array, Attention]:
        memory, encoder_weights = self.encode(src, src_positions, is_training, src_segments)
        logits, decoder_weights, cross_weights, _ = self.decode(
            tgt_in,
            memory,
            src,
            tgt_positions,
            src_positions,
            is_training,
            segments=tgt_segments,
            src_segments=src_segments,
        )
        return logits, Attention(encoder_weights, decoder_weights, cross_weights)

    def empty_cache(self, batch: int, tgt_len: int) -> CachedKeyValues:
        """One decoder layer's empty self-attention keys and values for `tgt_len` target
        tokens, [B, H, tgt_len, K] (a pass each, [loops, ...], with model.loops > 1)."""
        heads, key_size = self.cfg.num_heads, self.cfg.d_model // self.cfg.num_heads
        passes = () if self.cfg.loops == 1 else (self.cfg.loops,)
        empty = jnp.zeros((*passes, batch, heads, tgt_len, key_size), jnp.float32)
        return CachedKeyValues(empty, empty)

    def init_cache(self, memory: jax.Array, src_positions: jax.Array, tgt_len: int):
        """Empty self-attention caches and the encoder's keys and values, computed once."""
        caches = []
        for layer in self.decoder_layers:
            assert layer.cross_attn is not None, "a decoder with a cache here reads an encoder"
            memory_kv = heads_first(layer.cross_attn.project_kv(memory, src_positions))
            caches.append(LayerCache(self.empty_cache(memory.shape[0], tgt_len), memory_kv))
        return caches

    def decode_step(self, token, index, cache, src, positions, src_positions):
        """token [B] at target index `index` of a target at positions [B, T]
        -> (logits [B, V], updated cache)."""
        logits, _, _, cache = self.decode(
            token[:, None], None, src, positions, src_positions, cache=cache, index=index
        )
        return logits[:, 0], cache


def build(
    cfg: ModelConfig, src_scheme: PositionalScheme, tgt_scheme: PositionalScheme, vocab_size: int
) -> ModelFns:
    """Haiku-transform the model; every entry point shares the same parameters."""

    def fns():
        model = Transformer(cfg, src_scheme, tgt_scheme, vocab_size)

        def init(src, tgt_in):
            return model(src, tgt_in, is_training=True)

        def encode(src, positions=None):
            return model.encode(src, positions)[0]

        return init, (model.__call__, encode, model.init_cache, model.decode_step)

    transformed = hk.multi_transform(fns)
    return ModelFns(transformed.init, *transformed.apply)


class EncoderDecoder(Form):
    """`model.arch=encoder_decoder`, the default: the encoder reads the input, the decoder
    writes the answer token by token, each side with its own positions (the decoder's
    scheme pairs them with the encoder's, `pair_positions`)."""

    name = "encoder_decoder"
    label = ""
    packs = True
    attention = ("cross", "encoder", "decoder")

    def schemes(self, m: ModelConfig, task: Task) -> tuple[PositionalScheme, PositionalScheme]:
        src, tgt = side_schemes(m)
        for scheme in {src.name: src, tgt.name: tgt}.values():
            scheme.check(m.d_model, m.num_heads)
        src.check_pair(tgt, task)
        tgt.check_pair(src, task)
        return src, tgt

    def build(self, m, src_scheme, tgt_scheme, vocab_size, task) -> ModelFns:
        return build(m, src_scheme, tgt_scheme, vocab_size)

    def positions_needed(self, src_scheme, tgt_scheme, source: int, answer: int) -> int:
        needed = max(source, answer)
        return max(scheme.positions_needed(needed) for scheme in (src_scheme, tgt_scheme))

    def positions(self, key, src_scheme, tgt_scheme, task, src, answer_width, limit):
        return tgt_scheme.pair_positions(key, src_scheme, task, src, answer_width, limit)

    def decode_bytes(self, m: ModelConfig, src_width: int, answer_width: int) -> int:
        """The encoder's attention scores and activations (one layer at a time), every
        layer's cached keys and values of both sides, and the loop's copies of them."""
        s, t = src_width, answer_width
        cache = 2 * m.num_layers * m.loops * (s + t) * m.d_model + s * m.d_model
        return layer_bytes(m, s, s) + 4 * 2 * cache
