"""Tiny models the model and decoding tests build in-process."""

import jax
import jax.numpy as jnp

from jabcli.core.settings import ModelConfig
from jabcli.core.tokenizer import BOS_ID, PAD_ID
from jabcli.experiment.resolve import resolve
from jabcli.model.model import build
from jabcli.model.positions import get_scheme

VOCAB = 20


def make(norm="post", activation="relu", pos_encoding="sinusoidal", num_layers=1, loops=1):
    cfg = ModelConfig(
        d_model=32,
        num_heads=4,
        num_layers=num_layers,
        loops=loops,
        d_ff=64,
        dropout=0.1,
        norm=norm,
        activation=activation,
        pos_encoding=pos_encoding,
        max_positions=64,
    )
    scheme = get_scheme(pos_encoding)
    fns = build(cfg, scheme, scheme, VOCAB)
    fns = fns._replace(forward=jax.jit(fns.forward, static_argnames="is_training"))
    src = jnp.array([[5, 6, 7, 8, PAD_ID], [9, 10, PAD_ID, PAD_ID, PAD_ID]], jnp.int32)
    tgt = jnp.array([[BOS_ID, 8, 7, 6, 5], [BOS_ID, 10, 9, PAD_ID, PAD_ID]], jnp.int32)
    params = fns.init(jax.random.PRNGKey(0), src, tgt)
    return fns, params, src, tgt, scheme


SMALL_FORM = ["model.d_model=32", "model.d_ff=64", "model.num_layers=2",
              "model.max_positions=64", "task.max_len=6", "train.batch_size=8"]  # fmt: skip
ENCODER_FORM = ["model.arch=encoder", *SMALL_FORM]
DECODER_FORM = ["model.arch=decoder", *SMALL_FORM]


def scaled(form: list[str], task: str, sets: tuple[str, ...], scale: float):
    """An experiment of `form`, its weights `scale` times those it starts with (larger, so
    that answers vary from token to token), and a batch of it."""
    from jabcli.training.training import init

    experiment = resolve(task, sets=[*form, *sets])
    params = jax.tree_util.tree_map(lambda w: scale * w, init(experiment, 0).params)
    return experiment, params, experiment.sample(jax.random.PRNGKey(1), 16)


def encoder_form(task="reverse", *sets, scale=3):
    return scaled(ENCODER_FORM, task, sets, scale)


def decoder_form(task="reverse", *sets, scale=3):
    return scaled(DECODER_FORM, task, sets, scale)
