import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jabcli.config import ModelConfig
from jabcli.decode import greedy_decode, greedy_decode_full
from jabcli.model import build
from jabcli.positions import ENCODINGS, sinusoidal_encoding
from jabcli.tokenizer import BOS_ID, PAD_ID

VOCAB = 20


def make(norm="post", activation="relu", pos_encoding="sinusoidal", num_layers=2):
    cfg = ModelConfig(
        d_model=32,
        num_heads=4,
        num_layers=num_layers,
        d_ff=64,
        dropout=0.1,
        norm=norm,
        activation=activation,
        pos_encoding=pos_encoding,
        max_positions=64,
    )
    fns = build(cfg, VOCAB)
    fns = fns._replace(forward=jax.jit(fns.forward, static_argnames="is_training"))
    src = jnp.array([[5, 6, 7, 8, PAD_ID], [9, 10, PAD_ID, PAD_ID, PAD_ID]], jnp.int32)
    tgt = jnp.array([[BOS_ID, 8, 7, 6, 5], [BOS_ID, 10, 9, PAD_ID, PAD_ID]], jnp.int32)
    params = fns.init(jax.random.PRNGKey(0), src, tgt)
    return fns, params, src, tgt


def test_positional_encoding_follows_the_paper_formula():
    d_model, pe = 16, sinusoidal_encoding(50, 16)
    for pos in (0, 1, 7, 49):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert pe[pos, 2 * i] == pytest.approx(math.sin(angle), abs=1e-5)
            assert pe[pos, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-5)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_changing_a_later_target_token_leaves_earlier_predictions_unchanged(norm):
    fns, params, src, tgt = make(norm)
    logits, _ = fns.forward(params, None, src, tgt)
    changed = tgt.at[0, 3].set(12)
    logits_changed, _ = fns.forward(params, None, src, changed)
    np.testing.assert_allclose(logits[0, :3], logits_changed[0, :3], atol=1e-5)
    assert not np.allclose(logits[0, 3:], logits_changed[0, 3:], atol=1e-5)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_extra_padding_leaves_outputs_unchanged(norm):
    fns, params, src, tgt = make(norm, "gelu")
    logits, _ = fns.forward(params, None, src, tgt)
    more_src = jnp.pad(src, ((0, 0), (0, 4)), constant_values=PAD_ID)
    more_tgt = jnp.pad(tgt, ((0, 0), (0, 3)), constant_values=PAD_ID)
    padded_logits, attention = fns.forward(params, None, more_src, more_tgt)
    np.testing.assert_allclose(logits, padded_logits[:, : tgt.shape[1]], atol=1e-5)
    assert float(jnp.max(attention.cross[..., src.shape[1] :])) == 0.0


def test_attention_weights_are_returned_for_every_layer_and_sum_to_one():
    fns, params, src, tgt = make()
    _, attention = fns.forward(params, None, src, tgt)
    assert attention.encoder.shape == (2, 2, 4, 5, 5)
    assert attention.decoder.shape == (2, 2, 4, 5, 5)
    assert attention.cross.shape == (2, 2, 4, 5, 5)
    np.testing.assert_allclose(jnp.sum(attention.cross, -1), 1.0, atol=1e-5)


def test_dropout_is_active_only_in_training():
    fns, params, src, tgt = make()
    a, _ = fns.forward(params, jax.random.PRNGKey(1), src, tgt, is_training=True)
    b, _ = fns.forward(params, jax.random.PRNGKey(2), src, tgt, is_training=True)
    c, _ = fns.forward(params, None, src, tgt)
    d, _ = fns.forward(params, None, src, tgt)
    assert not np.allclose(a, b)
    np.testing.assert_array_equal(c, d)


@pytest.mark.parametrize(
    "norm, pos_encoding, num_layers",
    [("pre", "sinusoidal", 2)] + [("post", e, 1) for e in ENCODINGS],
)
def test_cached_decoding_gives_the_same_answers_as_full_recomputation(
    norm, pos_encoding, num_layers
):
    fns, params, src, _ = make(norm, pos_encoding=pos_encoding, num_layers=num_layers)
    # Larger weights than at initialisation, so that answers vary from token to token.
    params = jax.tree_util.tree_map(lambda w: 3 * w, params)
    src = jax.random.randint(jax.random.PRNGKey(3), (16, 9), 3, VOCAB)
    counts = jnp.full((16,), 9)
    positions = (
        fns.positions(jax.random.PRNGKey(4), counts, 9),
        fns.positions(jax.random.PRNGKey(5), counts + 3, 12),
    )
    fast = greedy_decode(fns, params, src, 12, *positions)
    slow = greedy_decode_full(fns, params, src, 12, *positions)
    np.testing.assert_array_equal(fast, slow)
    assert len(np.unique(np.asarray(fast))) > 3

    # The same token everywhere after <bos>: only positions can make the outputs differ.
    same = jnp.full((1, 6), 7, jnp.int32)
    tgt = jnp.full((1, 6), 8, jnp.int32).at[0, 0].set(BOS_ID)
    counting = jnp.arange(6)[None]
    logits, _ = fns.forward(params, None, same, tgt, src_positions=counting, tgt_positions=counting)
    assert not np.allclose(logits[0, 2], logits[0, 4], atol=1e-4)
