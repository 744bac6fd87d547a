"""The paper's Transformer (Delétang et al. 2023): an encoder alone, which answers every
symbol at once (`model.arch=encoder`).

One sequence per example: the source's tokens (its symbols and <eos>), then one empty
slot per answer token the task allows for that source (`derived.answer_slots`: the longest
answer and its <eos>), then padding. The encoder's output at slot j predicts the answer's
token j: its symbols, then <eos>, then nothing the loss counts. Nothing is fed back, so
an answer is one pass (`decode.one_pass_decode`): the likeliest token of every slot, cut
at the first <eos>.

The slots hold <bos>, which no source holds: the vocabulary, shared and saved with every
run, needs no token of its own. How many slots a sequence has depends on its source
alone, never on its answer, in training as in evaluation: the model is not told where
its answer ends, it writes <eos> there.

The encoder-decoder's interface is kept, so that training, scoring and evaluation need
no branch: the forward pass takes (src, tgt_in) and returns logits [B, T, V] that tgt_out
scores, reading only tgt_in's width T. Positions are the scheme's over the one sequence
(`slot_positions`), handed over as the source's [B, S] and the slots' [B, T]. The layers,
model.loops, dropout and pre/post norm are the encoder-decoder's encoder (model.py).
Shapes: B batch, S source width, T answer width, N = S + T, V vocabulary.
"""

from __future__ import annotations

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from jabcli.core.errors import JabError
from jabcli.core.settings import ModelConfig
from jabcli.core.tokenizer import BOS_ID, EOS_ID, PAD_ID
from jabcli.model.attention import NEG_INF
from jabcli.model.contract import Form, ModelFns, layer_bytes
from jabcli.model.model import Attention, Transformer
from jabcli.model.positions import PositionalScheme, counting
from jabcli.tasks import derived
from jabcli.tasks.contract import Task
from jabcli.tasks.hinted import Hinted

SLOT_ID = BOS_ID  # an empty answer slot


def answer_slots(task: Task, src: jax.Array, width: int) -> jax.Array:
    """[B] the empty slots each source of src [B, S] gets: one per token of the longest
    answer the task allows for it, <eos> included; at most `width`."""
    return jnp.minimum(derived.answer_slots(task, src), width)


def slotted(
    src: jax.Array, src_positions: jax.Array, slots: jax.Array, slot_positions: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Sources [B, S] at `src_positions` [B, S], and `slots` [B] empty slots at the first
    of `slot_positions` [B, T] -> the one sequence the encoder reads, ids [B, N] and
    positions [B, N] (each source's tokens, its slots, padding at position 0), and where
    each row's slot j is in it [B, T]."""
    answer_width = slot_positions.shape[1]
    width = src.shape[1] + answer_width
    tokens = jnp.sum(src != PAD_ID, axis=1)[:, None]
    column = jnp.arange(width)[None, :]
    in_source = column < tokens
    in_slots = ~in_source & (column < tokens + slots[:, None])
    widened = ((0, 0), (0, answer_width))
    ids = jnp.where(in_source, jnp.pad(src, widened), jnp.where(in_slots, SLOT_ID, PAD_ID))
    slot = jnp.clip(column - tokens, 0, answer_width - 1)
    at_slot = jnp.take_along_axis(slot_positions, jnp.broadcast_to(slot, ids.shape), axis=1)
    positions = jnp.where(
        in_source, jnp.pad(src_positions, widened), jnp.where(in_slots, at_slot, 0)
    )
    where = jnp.minimum(tokens + jnp.arange(answer_width)[None, :], width - 1)
    return ids.astype(jnp.int32), positions.astype(jnp.int32), where


def slot_positions(
    key: jax.Array,
    scheme: PositionalScheme,
    task: Task,
    src: jax.Array,
    answer_width: int,
    max_positions: int,
) -> tuple[jax.Array, jax.Array]:
    """The positions the encoder form reads for sources [B, S] and `answer_width` slot
    columns: the scheme's draw for each whole sequence (its tokens and its slots: 0, 1,
    2, ..., or for `randomized` sorted random positions), as the source's [B, S] and the
    slots' [B, answer_width]. The decoder-only form's answer continues its input the
    same way (decoder_only.py)."""
    width = src.shape[1] + answer_width
    if width > max_positions:  # static shapes: checked while tracing
        raise JabError(
            f"sequences of {width} tokens (input and answer) do not fit "
            f"model.max_positions = {max_positions}"
        )
    tokens = jnp.sum(src != PAD_ID, axis=1)
    drawn = scheme.draw(key, tokens + answer_slots(task, src, answer_width), width, max_positions)
    where = jnp.minimum(tokens[:, None] + jnp.arange(answer_width)[None, :], width - 1)
    return drawn[:, : src.shape[1]], jnp.take_along_axis(drawn, where, axis=1)


def sequence(
    src: jax.Array,
    tgt_in: jax.Array,
    slots: jax.Array,
    src_positions: jax.Array | None,
    tgt_positions: jax.Array | None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """What a one-pass form reads for sources [B, S], `slots` [B] empty answer slots and an
    answer as wide as tgt_in [B, T]: `slotted`'s sequence, positions and where each slot
    is. Positions are given for both sides (`slot_positions`) or for neither: then the
    whole sequence is at 0, 1, 2, ..."""
    answer_width = tgt_in.shape[1]
    if src_positions is None:
        tokens = jnp.sum(src != PAD_ID, axis=1)[:, None]
        src_positions = counting(*src.shape)
        tgt_positions = tokens + counting(src.shape[0], answer_width)
    assert tgt_positions is not None, "positions are given for both sides or for neither"
    return slotted(src, src_positions, slots, tgt_positions)


def counted(cfg: ModelConfig, scheme: PositionalScheme, ids: jax.Array, positions: jax.Array):
    """The positions [B, N] the encoder reads for the sequence ids [B, N]: as drawn, or
    numbered from the sequence itself where the paper's options say how (model.count_positions
    `down`: from its length down to 1; with model.answer_slots `exact`, whose sequence
    has no <eos> after the input, a scheme that counts counts 0, 1, 2, ... over it)."""
    down = cfg.count_positions == "down"
    counts = type(scheme).draw is PositionalScheme.draw  # not randomized
    if not (down or (cfg.answer_slots == "exact" and counts)):
        return positions
    real = ids != PAD_ID
    column = jnp.arange(ids.shape[1])[None, :]
    numbers = jnp.sum(real, axis=1, keepdims=True) - column if down else column
    return jnp.where(real, numbers, 0).astype(jnp.int32)


def class_ids(cfg: ModelConfig, task: Task) -> list[int]:
    """The token ids a slot may write with model.outputs=classes: the task's answer
    symbols, and <eos> where answers end in it (every task with model.answer_slots=eos;
    with `exact`, those whose answers vary in length, the paper's end marker)."""
    eos = cfg.answer_slots == "eos" or task.end_scored
    return [*task.tokenizer.ids(derived.answer_symbols(task)), *([EOS_ID] if eos else [])]


class EncoderOnly(hk.Module):
    """Sources and empty answer slots through one encoder: src [B, S] and tgt_in [B, T]
    (its width alone) -> (logits [B, T, V] of the answer's tokens, `Attention` whose
    `encoder` is the self-attention over the whole sequence [layers, B, H, N, N]; it has
    no decoder or cross-attention).

    With model.answer_slots=exact the source's <eos> is left out, each source gets one
    slot per symbol of its longest answer, and the slots past them say <eos> (their
    logits are fixed: nothing is learnt there). With model.outputs=classes every other
    token's logit is NEG_INF, so that the loss and the answer are over the classes."""

    def __init__(
        self,
        cfg: ModelConfig,
        scheme: PositionalScheme,
        vocab_size: int,
        task: Task,
        name: str | None = "encoder_only",
    ):
        super().__init__(name=name)
        # The encoder-decoder's embedding, encoder and output layer; its decoder is never
        # called, so it has no parameters.
        self.transformer = Transformer(cfg, scheme, scheme, vocab_size)
        self.cfg, self.scheme, self.task, self.vocab_size = cfg, scheme, task, vocab_size

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
        """Positions are given for both sides (`slot_positions`) or for neither: then the
        whole sequence is at 0, 1, 2, ... Rows are never packed (`Experiment.packs`)."""
        if src_segments is not None or tgt_segments is not None:
            raise ValueError("the encoder form trains on one example per row, never packed")
        exact = self.cfg.answer_slots == "exact"
        slots = answer_slots(self.task, src, tgt_in.shape[1])
        if exact:
            slots = jnp.minimum(derived.exact_slots(self.task, src), tgt_in.shape[1])
            src = jnp.where(src == EOS_ID, PAD_ID, src)
        ids, positions, where = sequence(src, tgt_in, slots, src_positions, tgt_positions)
        positions = counted(self.cfg, self.scheme, ids, positions)
        x, weights = self.transformer.encode(ids, positions, is_training)
        answers = jnp.take_along_axis(x, where[:, :, None], axis=1)
        logits = self.transformer.to_logits(answers)
        if self.cfg.outputs == "classes":
            allowed = np.zeros(self.vocab_size, bool)
            allowed[class_ids(self.cfg, self.task)] = True
            logits = jnp.where(allowed, logits, NEG_INF)
        if exact:
            past = jnp.arange(tgt_in.shape[1])[None, :, None] >= slots[:, None, None]
            ends = jnp.where(jnp.arange(self.vocab_size) == EOS_ID, 0.0, NEG_INF)
            logits = jnp.where(past, ends, logits)
        return logits, Attention(weights, None, None)


class OnePassForm(Form):
    """A model form of the user's own, in the common case: one pass over the input and
    one empty slot per answer token, as `model.arch=encoder` reads them (`slotted`). It
    defines `name` and `forward`; jab lays out the sequence, draws its positions with the
    run's positional scheme, reads the answer off the slots and decodes it."""

    one_pass = True
    heads = False  # model.num_heads is the form's own business

    def forward(
        self,
        m: ModelConfig,
        scheme: PositionalScheme,
        vocab_size: int,
        ids: jax.Array,
        positions: jax.Array,
        is_training: bool,
    ) -> jax.Array:
        """Inside `hk.transform`: ids [B, N] (each input's tokens, its empty answer slots,
        then <pad>, id 0) at positions [B, N] -> logits [B, N, vocab_size]. `m` is the
        run's model config (model.d_model, model.num_layers, ...)."""
        raise NotImplementedError

    def build(self, m, src_scheme, tgt_scheme, vocab_size, task) -> ModelFns:
        def forward(
            src,
            tgt_in,
            is_training=False,
            src_positions=None,
            tgt_positions=None,
            src_segments=None,
            tgt_segments=None,
        ):
            slots = answer_slots(task, src, tgt_in.shape[1])
            ids, positions, where = sequence(src, tgt_in, slots, src_positions, tgt_positions)
            logits = self.forward(m, src_scheme, vocab_size, ids, positions, is_training)
            return jnp.take_along_axis(logits, where[:, :, None], axis=1), Attention(
                None, None, None
            )

        transformed = hk.transform(forward)
        return ModelFns(transformed.init, transformed.apply, None, None, None)

    def positions(self, key, src_scheme, tgt_scheme, task, src, answer_width, limit):
        return slot_positions(key, src_scheme, task, src, answer_width, limit)

    def decode_bytes(self, m: ModelConfig, src_width: int, answer_width: int) -> int:
        """As one attention layer over the sequence: a form's own may hold more."""
        n = src_width + answer_width
        return layer_bytes(m, n, n)


class Encoder(OnePassForm):
    """`model.arch=encoder`: the paper's Transformer, every answer token from one pass
    over the input and its empty slots; one positional scheme over the whole sequence."""

    name = "encoder"
    attention = ("encoder",)
    heads = True
    trims_padding = True
    paper_options = True

    def schemes(self, m: ModelConfig, task: Task):
        """The one scheme, checked against the paper's options."""
        if m.outputs == "classes" and not task.generated:
            raise JabError(
                "model.outputs=classes needs a built-in task, whose answer symbols are known; "
                f"{task.label} is a data file"
            )
        if m.outputs == "classes" and isinstance(task, Hinted):
            raise JabError("model.outputs=classes writes no index hints: not with task.index_hints")
        scheme, _ = super().schemes(m, task)
        if m.count_positions == "down" and type(scheme).draw is not PositionalScheme.draw:
            raise JabError(
                "model.count_positions=down numbers the sequence from its end; "
                f"model.pos_encoding={scheme.name} draws positions of its own"
            )
        return scheme, scheme

    def build(self, m, src_scheme, tgt_scheme, vocab_size, task) -> ModelFns:
        """An answer is one pass of `forward`: there is no incremental decoding, so
        `encode`, `init_cache` and `decode_step` are None."""

        def forward(src, tgt_in, **options):
            return EncoderOnly(m, src_scheme, vocab_size, task)(src, tgt_in, **options)

        transformed = hk.transform(forward)
        return ModelFns(transformed.init, transformed.apply, None, None, None)
