"""The Transformer's layers: the feed-forward block, Add & Norm around a sublayer, and
the encoder's and the decoder's layers built of attention (attention.py) and them.
Shapes: [B, T, D] in, [B, T, D] out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import haiku as hk
import jax

from jabcli.core.settings import ModelConfig
from jabcli.model.attention import CachedKeyValues, KeyValues, MultiHeadAttention
from jabcli.model.positions import PositionalScheme


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

    def __call__(self, x: jax.Array, sublayer: Callable, is_training: bool):
        out, *extra = sublayer(self.norm(x) if self.pre else x)
        if is_training and self.dropout:
            out = hk.dropout(hk.next_rng_key(), self.dropout, out)
        x = x + out
        return (x if self.pre else self.norm(x)), *extra


class EncoderLayer(hk.Module):
    """Self-attention then feed-forward, each wrapped in Add & Norm: [B, S, D] -> [B, S, D]."""

    def __init__(self, cfg: ModelConfig, scheme: PositionalScheme, name: str | None = None):
        super().__init__(name=name)
        self.self_attn = MultiHeadAttention(
            cfg.num_heads,
            cfg.d_model,
            scheme,
            causal=False,
            bias=cfg.attention_bias,
            name="self_attention",
        )
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, name="feed_forward")
        self.attn_block = Residual(cfg, name="attention_residual")
        self.ffn_block = Residual(cfg, name="feed_forward_residual")

    def __call__(self, x, mask, positions, is_training):
        def attend(h):
            out, weights, _ = self.self_attn(h, h, mask, positions, positions)
            return out, weights

        x, weights = self.attn_block(x, attend, is_training)
        (x,) = self.ffn_block(x, lambda h: (self.ffn(h),), is_training)
        return x, weights


class LayerCache(NamedTuple):
    """One decoder layer's keys and values while decoding: its own so far [B, H, T, K]
    and the encoder's [B, H, S, K] (None for a decoder without cross-attention)."""

    self_kv: KeyValues | CachedKeyValues  # KeyValues: a pass over a whole target, no cache
    cross_kv: KeyValues | CachedKeyValues | None


class DecoderLayer(hk.Module):
    """Masked self-attention, cross-attention to the encoder, feed-forward; each Add & Norm.
    Without `cross` (a decoder-only model, decoder_only.py) there is no cross-attention."""

    def __init__(
        self,
        cfg: ModelConfig,
        scheme: PositionalScheme,
        cross: bool = True,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.self_attn = MultiHeadAttention(
            cfg.num_heads, cfg.d_model, scheme, causal=True, name="self_attention"
        )
        self.cross_attn: MultiHeadAttention | None = None
        self.cross_block: Residual | None = None
        if cross:
            self.cross_attn = MultiHeadAttention(
                cfg.num_heads,
                cfg.d_model,
                scheme.cross_attention(),
                causal=False,
                name="cross_attention",
            )
            self.cross_block = Residual(cfg, name="cross_attention_residual")
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, name="feed_forward")
        self.self_block = Residual(cfg, name="self_attention_residual")
        self.ffn_block = Residual(cfg, name="feed_forward_residual")

    def __call__(
        self,
        x,
        memory,
        self_mask,
        cross_mask,
        positions,
        key_positions,
        src_positions,
        is_training,
        cache: LayerCache | None = None,
        index=0,
    ):
        """x [B, Tq, D] at positions [B, Tq] over target keys at `key_positions` and the
        encoder's `memory` [B, S, D] -> (x, self weights, cross weights, keys and values);
        without cross-attention, its weights and keys and values are None.

        The encoder's keys and values are projected first; while decoding, the cache
        already holds them (and memory is None)."""
        cross_kv: KeyValues | CachedKeyValues | None
        self_kv, cross_kv = (None, None) if cache is None else cache
        if cache is None and self.cross_attn is not None:
            cross_kv = self.cross_attn.project_kv(memory, src_positions)

        def self_attend(h):
            return self.self_attn(h, h, self_mask, positions, key_positions, self_kv, index)

        def cross_attend(h):
            assert self.cross_attn is not None  # cross_block, which calls this, is made with it
            return self.cross_attn(h, None, cross_mask, positions, src_positions, cross_kv)

        x, self_weights, self_kv = self.self_block(x, self_attend, is_training)
        cross_weights = None
        if self.cross_block is not None:  # made with cross_attn
            x, cross_weights, cross_kv = self.cross_block(x, cross_attend, is_training)
        (x,) = self.ffn_block(x, lambda h: (self.ffn(h),), is_training)
        return x, self_weights, cross_weights, LayerCache(self_kv, cross_kv)
