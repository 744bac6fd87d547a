"""What a model form is to the rest of jab (`model.arch`): the contract every form keeps.

A form is a way of reading a task's examples and answering them: the encoder-decoder of
"Attention Is All You Need" (model.py, the default), which answers token by token; the
paper's encoder alone (encoder_only.py), which reads the input followed by empty answer
slots and answers every token at once, as the paper's recurrent models (recurrent.py: an
LSTM, a Stack-RNN, a Tape-RNN) do; or a decoder alone (decoder_only.py), which reads the
input and then its answer so far in one causal sequence, token by token. Each form's
module defines its `Form`; `registry.FORMS` lists them. Nothing outside the model layer
asks a form's name: it asks the form (`Experiment.form`) the questions below.

Every form's model functions keep one interface (`ModelFns`), so that training, scoring
and evaluation need no branch on the form:

- `init(rng, src, tgt_in)` -> params;
- `forward(params, rng, src [B, S], tgt_in [B, T], is_training=..., src_positions=...,
  tgt_positions=..., src_segments=..., tgt_segments=...)` -> (logits [B, T, V] that
  tgt_out scores, the attention weights or what the form has instead);
- for a form that answers token by token (`one_pass` False), `encode(params, rng, src,
  positions)` -> memory, `init_cache(params, rng, memory, src_positions, max_out)` ->
  cache, and `decode_step(params, rng, token [B], index, cache, src, tgt_positions,
  src_positions)` -> (logits [B, V], cache), which `decode.greedy_decode` runs (the
  memory is whatever init_cache reads: the encoder's output, or the source itself); a
  one-pass form leaves them None and is decoded by `decode.one_pass_decode`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, NamedTuple

import jax

from jabcli.core.errors import JabError
from jabcli.core.settings import ModelConfig
from jabcli.model.positions import PositionalScheme, get_scheme
from jabcli.tasks.contract import Task

# The model keys that make model.arch=encoder the paper's Transformer, a difference each.
PAPER_OPTIONS = ("embedding_init", "answer_slots", "count_positions", "attention_bias", "outputs")


class ModelFns(NamedTuple):
    """Pure functions of (params, rng, ...) a form builds; they share one set of
    parameters (see the module docstring for their signatures)."""

    init: Callable
    forward: Callable
    encode: Callable | None
    init_cache: Callable | None
    decode_step: Callable | None


class Form:
    """A model form. A new form defines `name`, `build`, `positions` and `decode_bytes`,
    and the class attributes that differ from the defaults; `schemes` and
    `positions_needed` have defaults for a form that reads one sequence."""

    name: ClassVar[str]
    # True: the model reads the input and one empty slot per answer token and answers
    # every token at once (`decode.one_pass_decode`); False: token by token, each fed back
    # (`decode.greedy_decode` through encode, init_cache and decode_step).
    one_pass: ClassVar[bool] = False
    # Whether training may pack two examples per row (packing.py: segment ids).
    packs: ClassVar[bool] = False
    # Whether nothing the form computes for a row depends on the padding after it, so that
    # train.lengths=per_batch may run a batch narrower than task.max_len (training/buckets.py).
    trims_padding: ClassVar[bool] = False
    # The attention `jab show-attention` can draw, the default first; () refuses it.
    attention: ClassVar[tuple[str, ...]] = ()
    # Whether the form reads a positional scheme (model.pos_encoding) at all; a run of a
    # form that does not records model.pos_encoding as none.
    positional: ClassVar[bool] = True
    # Whether the answer continues the input in one causal sequence (a decoder-only
    # model): its "decoder" attention's queries and keys are the input's tokens, then
    # the answer's, as `jab show-attention` labels them.
    prefixed: ClassVar[bool] = False
    # Whether the form attends with model.num_heads heads (a recurrent form ignores it).
    heads: ClassVar[bool] = True
    # Whether the form has a memory of cells (model.memory_size, model.memory_cell_size).
    memory: ClassVar[bool] = False
    # Whether the form can add a learned vector to the answer's tokens
    # (model.answer_embedding): where they continue the input in one sequence.
    marks_answer: ClassVar[bool] = False
    # Whether it takes the paper's Transformer's options (`PAPER_OPTIONS`): the encoder form.
    paper_options: ClassVar[bool] = False

    @property
    def label(self) -> str:
        """What a run's description says of its form after the encoding ("copy,
        sinusoidal, encoder-only"); "" for the default form."""
        return f"{self.name}-only"

    def check(self, m: ModelConfig) -> None:
        """Refuse, in one line, a model option the form has no use for: the memory's, for
        a form without one, and the answer's vector, for a form that does not mark it."""
        if self.heads and m.d_model % m.num_heads:
            raise JabError(
                f"model.d_model ({m.d_model}) must be divisible by model.num_heads ({m.num_heads})"
            )
        if m.answer_embedding and not self.marks_answer:
            raise JabError(
                "model.answer_embedding marks the answer's tokens where they continue the "
                f"input in one sequence (model.arch=decoder); model.arch={self.name} tells "
                "them apart without it"
            )
        defaults = ModelConfig()
        if not self.paper_options:
            for key in PAPER_OPTIONS:
                if getattr(m, key) != getattr(defaults, key):
                    raise JabError(
                        f"model.{key} is an option of the paper's Transformer, "
                        f"model.arch=encoder; model.arch={self.name} does not take it (got "
                        f"{getattr(m, key)})"
                    )
        if self.memory:
            return
        for key in ("memory_size", "memory_cell_size", "memory_grows"):
            if getattr(m, key) != getattr(defaults, key):
                raise JabError(
                    f"model.{key} sizes the memory of model.arch=stack_rnn or tape_rnn; "
                    f"model.arch={self.name} has none (got {getattr(m, key)})"
                )

    def schemes(self, m: ModelConfig, task: Task) -> tuple[PositionalScheme, PositionalScheme]:
        """The positional schemes of the input and of the answer, checked: by default one
        scheme for the whole sequence, which must not pair the answer's positions with
        the input's, and no decoder's own encoding."""
        if m.tgt_pos_encoding:
            raise JabError(
                f"model.arch={self.name} has no decoder: set model.pos_encoding, not "
                f"model.tgt_pos_encoding (got {m.tgt_pos_encoding!r})"
            )
        scheme, _ = side_schemes(m)
        if pairs(scheme):
            raise JabError(
                f"model.pos_encoding={scheme.name} pairs the answer's positions with the "
                f"input's, and model.arch={self.name} reads one sequence; use another encoding "
                "with it"
            )
        scheme.check(m.d_model, m.num_heads)
        return scheme, scheme

    def build(
        self,
        m: ModelConfig,
        src_scheme: PositionalScheme,
        tgt_scheme: PositionalScheme,
        vocab_size: int,
        task: Task,
    ) -> ModelFns:
        """The form's model functions, Haiku-transformed."""
        raise NotImplementedError

    def positions_needed(
        self, src_scheme: PositionalScheme, tgt_scheme: PositionalScheme, source: int, answer: int
    ) -> int:
        """Model positions that a source of `source` tokens and an answer of `answer`
        tokens need; by default one sequence holding both."""
        return src_scheme.positions_needed(source + answer)

    def positions(
        self,
        key: jax.Array,
        src_scheme: PositionalScheme,
        tgt_scheme: PositionalScheme,
        task: Task,
        src: jax.Array,
        answer_width: int,
        limit: int,
    ) -> tuple[jax.Array, jax.Array]:
        """The positions the model reads for sources [B, S] and `answer_width` answer
        columns: [B, S] and [B, answer_width]; `limit` is model.max_positions."""
        raise NotImplementedError

    def decode_bytes(self, m: ModelConfig, src_width: int, answer_width: int) -> int:
        """About what answering one source row `src_width` wide with `answer_width` tokens
        holds at its peak (decode.plan sizes chunks with it)."""
        raise NotImplementedError

    def drawn_layers(self, m: ModelConfig) -> int:
        """The layers `jab show-attention --layer` chooses from: one a pass, with loops."""
        return m.num_layers * m.loops


def pairs(scheme: PositionalScheme) -> bool:
    """Whether a scheme places the answer's positions from the input's (coupled ones),
    rather than drawing each side's own."""
    return type(scheme).pair_positions is not PositionalScheme.pair_positions


def side_schemes(m: ModelConfig) -> tuple[PositionalScheme, PositionalScheme]:
    """The schemes of the source and of the target: each side's own key, else
    model.pos_encoding."""
    both = get_scheme(m.pos_encoding)
    src, tgt = (
        get_scheme(name, f"model.{side}_pos_encoding") if name else both
        for side, name in (("src", m.src_pos_encoding), ("tgt", m.tgt_pos_encoding))
    )
    return src, tgt


def layer_bytes(m: ModelConfig, queries: int, keys: int) -> int:
    """Bytes of one attention layer's scores and activations for `queries` tokens that
    attend to `keys` (what a form's `decode_bytes` counts one layer at a time)."""
    return 4 * (2 * m.num_heads * queries * keys + queries * (8 * m.d_model + 2 * m.d_ff))
