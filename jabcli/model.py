"""The encoder-decoder Transformer of "Attention Is All You Need", in Haiku.

Read top to bottom: masks, attention, feed-forward, the two layer kinds, then the
whole model. The positional encodings it can use are in positions.py. Shapes use
B = batch, S = source time, T = target time, D = d_model, H = heads, K = D / H.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from jabcli import positions as pos
from jabcli.config import ModelConfig
from jabcli.tokenizer import PAD_ID

NEG_INF = -1e9


def padding_mask(query_len: int, key_ids: jax.Array) -> jax.Array:
    """[B, 1, Tq, Tk] True where the key is a real token."""
    return jnp.broadcast_to(
        (key_ids != PAD_ID)[:, None, None, :], (key_ids.shape[0], 1, query_len, key_ids.shape[1])
    )


def causal_mask(length: int) -> jax.Array:
    """[1, 1, T, T] True where the key is not in the future."""
    return jnp.tril(jnp.ones((length, length), bool))[None, None]


class MultiHeadAttention(hk.Module):
    """Scaled dot-product attention over H heads that also returns its weights.

    Queries come from one sequence and keys/values from another (or the same); the
    key/value projection is one fused matmul, and `project_kv` is public so that
    decoding computes the encoder's keys and values once per sequence. With
    `encoding` "rope" or "alibi" the positions [B, T] of queries and keys shape the
    scores (see positions.py); otherwise they are ignored.
    """

    def __init__(
        self, num_heads: int, d_model: int, encoding: str | None = None, name: str | None = None
    ):
        super().__init__(name=name)
        self.encoding = encoding
        self.num_heads = num_heads
        self.key_size = d_model // num_heads
        self.query_proj = hk.Linear(d_model, name="query")
        self.kv_proj = hk.Linear(2 * d_model, name="key_value")
        self.out_proj = hk.Linear(d_model, name="output")

    def project_kv(
        self, inputs: jax.Array, positions: jax.Array | None = None
    ) -> tuple[jax.Array, jax.Array]:
        """[B, Tk, D] at positions [B, Tk] -> keys, values, each [B, Tk, H, K]."""
        kv = self.kv_proj(inputs).reshape(*inputs.shape[:2], 2, self.num_heads, self.key_size)
        keys, values = kv[:, :, 0], kv[:, :, 1]
        if self.encoding == "rope":
            keys = pos.rope(keys, positions)
        return keys, values

    def __call__(
        self,
        query_inputs: jax.Array,
        keys: jax.Array,
        values: jax.Array,
        mask: jax.Array,
        query_positions: jax.Array | None = None,
        key_positions: jax.Array | None = None,
    ) -> tuple[jax.Array, jax.Array]:
        """[B, Tq, D] over keys/values [B, Tk, H, K] -> [B, Tq, D], weights [B, H, Tq, Tk]"""
        batch, query_len, _ = query_inputs.shape
        queries = self.query_proj(query_inputs).reshape(
            batch, query_len, self.num_heads, self.key_size
        )
        if self.encoding == "rope":
            queries = pos.rope(queries, query_positions)
        logits = jnp.einsum("bqhk,bthk->bhqt", queries, keys) / np.sqrt(self.key_size)
        if self.encoding == "alibi":
            logits = logits + pos.alibi_bias(query_positions, key_positions, self.num_heads)
        logits = jnp.where(mask, logits, NEG_INF)
        attn_weights = jax.nn.softmax(logits, axis=-1)
        attended = jnp.einsum("bhqt,bthk->bqhk", attn_weights, values)
        return self.out_proj(attended.reshape(batch, query_len, -1)), attn_weights


class FeedForward(hk.Module):
    """Position-wise Linear -> activation -> Linear: [B, T, D] -> [B, T, D]."""

    def __init__(self, d_model: int, d_ff: int, activation: str, name: str | None = None):
        super().__init__(name=name)
        self.hidden = hk.Linear(d_ff, name="hidden")
        self.out = hk.Linear(d_model, name="out")
        self.activation = jax.nn.relu if activation == "relu" else jax.nn.gelu

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.out(self.activation(self.hidden(x)))


class Residual(hk.Module):
    """Add & Norm around a sublayer: post-LN `norm(x + f(x))` or pre-LN `x + f(norm(x))`."""

    def __init__(self, cfg: ModelConfig, name: str | None = None):
        super().__init__(name=name)
        self.pre = cfg.norm == "pre"
        self.dropout = cfg.dropout
        self.norm = hk.LayerNorm(axis=-1, create_scale=True, create_offset=True, name="norm")

    def __call__(self, x: jax.Array, sublayer, is_training: bool):
        out, *extra = sublayer(self.norm(x) if self.pre else x)
        if is_training and self.dropout:
            out = hk.dropout(hk.next_rng_key(), self.dropout, out)
        x = x + out
        return (x if self.pre else self.norm(x)), *extra


def self_attention_encoding(cfg: ModelConfig) -> str | None:
    """The encoding that acts inside self-attention, if any (rope or alibi)."""
    return cfg.pos_encoding if cfg.pos_encoding in pos.IN_ATTENTION else None


class EncoderLayer(hk.Module):
    """Self-attention then feed-forward, each wrapped in Add & Norm: [B, S, D] -> [B, S, D]."""

    def __init__(self, cfg: ModelConfig, name: str | None = None):
        super().__init__(name=name)
        self.self_attn = MultiHeadAttention(
            cfg.num_heads, cfg.d_model, self_attention_encoding(cfg), name="self_attention"
        )
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, name="feed_forward")
        self.attn_block = Residual(cfg, name="attention_residual")
        self.ffn_block = Residual(cfg, name="feed_forward_residual")

    def __call__(self, x, mask, positions, is_training):
        def attend(h):
            keys, values = self.self_attn.project_kv(h, positions)
            return self.self_attn(h, keys, values, mask, positions, positions)

        x, weights = self.attn_block(x, attend, is_training)
        (x,) = self.ffn_block(x, lambda h: (self.ffn(h),), is_training)
        return x, weights


class LayerCache(NamedTuple):
    """One decoder layer's state while decoding: keys/values [B, T or S, H, K]."""

    self_keys: jax.Array
    self_values: jax.Array
    cross_keys: jax.Array
    cross_values: jax.Array


class DecoderLayer(hk.Module):
    """Masked self-attention, cross-attention to the encoder, feed-forward; each Add & Norm."""

    def __init__(self, cfg: ModelConfig, name: str | None = None):
        super().__init__(name=name)
        self.self_attn = MultiHeadAttention(
            cfg.num_heads, cfg.d_model, self_attention_encoding(cfg), name="self_attention"
        )
        self.cross_attn = MultiHeadAttention(cfg.num_heads, cfg.d_model, name="cross_attention")
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, name="feed_forward")
        self.self_block = Residual(cfg, name="self_attention_residual")
        self.cross_block = Residual(cfg, name="cross_attention_residual")
        self.ffn_block = Residual(cfg, name="feed_forward_residual")

    def __call__(self, x, memory_kv, self_mask, cross_mask, positions, is_training):
        """x [B, T, D] at positions [B, T] with the encoder's keys/values
        -> (x, self weights, cross weights)."""

        def self_attend(h):
            keys, values = self.self_attn.project_kv(h, positions)
            return self.self_attn(h, keys, values, self_mask, positions, positions)

        x, self_weights = self.self_block(x, self_attend, is_training)
        x, cross_weights = self.cross_block(
            x, lambda h: self.cross_attn(h, *memory_kv, cross_mask), is_training
        )
        (x,) = self.ffn_block(x, lambda h: (self.ffn(h),), is_training)
        return x, self_weights, cross_weights

    def step(self, x, index, cache: LayerCache, cross_mask, positions):
        """Target index `index`, x [B, 1, D], reading and extending the cache (no dropout);
        `positions` [B, T] are the positions of the whole target."""
        here = jax.lax.dynamic_slice_in_dim(positions, index, 1, axis=1)

        def self_attend(h):
            keys, values = self.self_attn.project_kv(h, here)
            self_keys = jax.lax.dynamic_update_slice_in_dim(cache.self_keys, keys, index, axis=1)
            self_values = jax.lax.dynamic_update_slice_in_dim(
                cache.self_values, values, index, axis=1
            )
            visible = (jnp.arange(self_keys.shape[1]) <= index)[None, None, None, :]
            out, _ = self.self_attn(h, self_keys, self_values, visible, here, positions)
            return out, self_keys, self_values

        x, self_keys, self_values = self.self_block(x, self_attend, False)
        x, _ = self.cross_block(
            x, lambda h: self.cross_attn(h, cache.cross_keys, cache.cross_values, cross_mask), False
        )
        (x,) = self.ffn_block(x, lambda h: (self.ffn(h),), False)
        return x, cache._replace(self_keys=self_keys, self_values=self_values)


class Attention(NamedTuple):
    """Attention weights of every layer, each [layers, B, H, Tq, Tk]."""

    encoder: jax.Array
    decoder: jax.Array
    cross: jax.Array


class Transformer(hk.Module):
    """Token ids in, next-token logits out: src [B, S], tgt_in [B, T] -> [B, T, vocab]."""

    def __init__(self, cfg: ModelConfig, vocab_size: int, name: str | None = "transformer"):
        super().__init__(name=name)
        self.cfg = cfg
        # Initialised at 1/sqrt(D) so that, once scaled by sqrt(D), token embeddings are about
        # as large as the positional encoding instead of drowning it out.
        self.embed = hk.Embed(
            vocab_size,
            cfg.d_model,
            name="embed",
            w_init=hk.initializers.TruncatedNormal(cfg.d_model**-0.5),
        )
        self.encoder_layers = [
            EncoderLayer(cfg, name=f"encoder_{i}") for i in range(cfg.num_layers)
        ]
        self.decoder_layers = [
            DecoderLayer(cfg, name=f"decoder_{i}") for i in range(cfg.num_layers)
        ]
        if cfg.pos_encoding == "learned":
            self.position_embed = hk.Embed(
                cfg.max_positions,
                cfg.d_model,
                name="position_embed",
                w_init=hk.initializers.TruncatedNormal(0.5),
            )
        self.final_norms = [
            hk.LayerNorm(-1, True, True, name=f"{side}_final_norm")
            for side in ("encoder", "decoder")
        ]
        self.to_logits = hk.Linear(vocab_size, name="to_logits")

    def embed_tokens(self, ids: jax.Array, positions: jax.Array, is_training: bool) -> jax.Array:
        """[B, T] ids at positions [B, T] -> [B, T, D] scaled embedding (+ position vectors)."""
        cfg = self.cfg
        x = self.embed(ids) * np.sqrt(cfg.d_model)
        if cfg.pos_encoding == "learned":
            x = x + self.position_embed(positions)
        elif cfg.pos_encoding in pos.ADDED:
            table = jnp.asarray(pos.sinusoidal_encoding(cfg.max_positions, cfg.d_model))
            x = x + jnp.take(table, positions, axis=0)
        if is_training and self.cfg.dropout:
            x = hk.dropout(hk.next_rng_key(), self.cfg.dropout, x)
        return x

    def encode(
        self, src: jax.Array, positions: jax.Array | None = None, is_training: bool = False
    ) -> tuple[jax.Array, jax.Array]:
        """src [B, S] at positions [B, S] (default 0, 1, ...)
        -> (memory [B, S, D], encoder self-attention [layers, B, H, S, S])."""
        positions = pos.counting(*src.shape) if positions is None else positions
        x = self.embed_tokens(src, positions, is_training)
        mask = padding_mask(src.shape[1], src)
        all_weights = []
        for layer in self.encoder_layers:
            x, weights = layer(x, mask, positions, is_training)
            all_weights.append(weights)
        if self.cfg.norm == "pre":
            x = self.final_norms[0](x)
        return x, jnp.stack(all_weights)

    def decode(self, tgt_in, memory, src, positions=None, is_training: bool = False):
        """tgt_in [B, T] at positions [B, T] with memory [B, S, D]
        -> (logits [B, T, V], self and cross weights)."""
        positions = pos.counting(*tgt_in.shape) if positions is None else positions
        x = self.embed_tokens(tgt_in, positions, is_training)
        length = tgt_in.shape[1]
        # Target padding only ever trails the target, so it is always in the future of a
        # real query and the causal mask hides it; cached decoding then matches exactly.
        self_mask = causal_mask(length)
        cross_mask = padding_mask(length, src)
        self_weights, cross_weights = [], []
        for layer in self.decoder_layers:
            memory_kv = layer.cross_attn.project_kv(memory)
            x, sw, cw = layer(x, memory_kv, self_mask, cross_mask, positions, is_training)
            self_weights.append(sw)
            cross_weights.append(cw)
        return self.logits(x), jnp.stack(self_weights), jnp.stack(cross_weights)

    def __call__(
        self, src, tgt_in, is_training: bool = False, src_positions=None, tgt_positions=None
    ) -> tuple[jax.Array, Attention]:
        memory, encoder_weights = self.encode(src, src_positions, is_training)
        logits, decoder_weights, cross_weights = self.decode(
            tgt_in, memory, src, tgt_positions, is_training
        )
        return logits, Attention(encoder_weights, decoder_weights, cross_weights)

    def logits(self, x: jax.Array) -> jax.Array:
        if self.cfg.norm == "pre":
            x = self.final_norms[1](x)
        return self.to_logits(x)

    def init_cache(self, memory: jax.Array, tgt_len: int) -> list[LayerCache]:
        """Empty self-attention caches and the encoder's keys/values, computed once."""
        batch = memory.shape[0]
        heads, key_size = self.cfg.num_heads, self.cfg.d_model // self.cfg.num_heads
        empty = jnp.zeros((batch, tgt_len, heads, key_size), memory.dtype)
        return [
            LayerCache(empty, empty, *layer.cross_attn.project_kv(memory))
            for layer in self.decoder_layers
        ]

    def decode_step(self, token, index, cache, src, positions):
        """token [B] at target index `index` of a target at positions [B, T]
        -> (logits [B, V], updated cache)."""
        here = jax.lax.dynamic_slice_in_dim(positions, index, 1, axis=1)
        x = self.embed_tokens(token[:, None], here, False)
        cross_mask = (src != PAD_ID)[:, None, None, :]
        new_cache = []
        for layer, layer_cache in zip(self.decoder_layers, cache):
            x, layer_cache = layer.step(x, index, layer_cache, cross_mask, positions)
            new_cache.append(layer_cache)
        return self.logits(x)[:, 0], new_cache


class ModelFns(NamedTuple):
    """Pure functions of (params, rng, ...) built by `build`, and `positions(key, counts,
    width)`, which gives the positions [batch, width] the model's encoding reads."""

    init: callable
    forward: callable
    encode: callable
    init_cache: callable
    decode_step: callable
    positions: callable


def build(cfg: ModelConfig, vocab_size: int) -> ModelFns:
    """Haiku-transform the model; every entry point shares the same parameters."""

    def fns():
        model = Transformer(cfg, vocab_size)

        def init(src, tgt_in):
            return model(src, tgt_in, is_training=True)

        def encode(src, positions=None):
            return model.encode(src, positions)[0]

        def init_cache(memory, tgt_len):
            return model.init_cache(memory, tgt_len)

        return init, (model.__call__, encode, init_cache, model.decode_step)

    transformed = hk.multi_transform(fns)
    forward, encode, init_cache, decode_step = transformed.apply
    positions = functools.partial(pos.draw, cfg.pos_encoding, cfg.max_positions)
    return ModelFns(transformed.init, forward, encode, init_cache, decode_step, positions)
