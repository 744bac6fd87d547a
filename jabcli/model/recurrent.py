"""The paper's recurrent baselines (Delétang et al. 2023, Table 2): an LSTM
(`model.arch=lstm`), a Stack-RNN (Joulin & Mikolov 2015, `stack_rnn`) and a Tape-RNN
(`tape_rnn`), ported from the paper's `models/rnn.py`, `stack_rnn.py` and `tape_rnn.py`.

They read what the paper's models read, as the encoder form does (encoder_only.py): the
source's tokens (its symbols and <eos>), then one empty slot per answer token the task
allows for that source, then padding, which comes after every slot and so changes no
answer. Each token goes in one-hot; the core steps over the sequence (`hk.dynamic_unroll`,
a scan) and its output at slot j, through a ReLU and a linear layer, predicts the answer's
token j. Nothing is fed back: an answer is one pass (`decode.one_pass_decode`).

- LSTM: `hk.LSTM` of model.d_model units.
- Stack-RNN: a ReLU RNN (`hk.VanillaRNN`, the paper's controller) of model.d_model units
  that reads, beside each token, the top cell of a stack of model.memory_size cells of
  model.memory_cell_size numbers (with model.memory_grows, a cell per column of the
  sequence: more than it can push, so no cell ever falls off); from its new state it
  computes a value to push and a softmax over three actions (push, pop, no-op), and the
  next stack is their mixture (`update_stack`).
- Tape-RNN: the same RNN reading the cell under a tape's head; it writes a value (an MLP
  of two hidden layers of 64) into that cell, then moves by a softmax over five actions
  (stay, one cell left or right, as many cells as the input has symbols left or right),
  the next tape their mixture (`update_tape`). The head is always cell 0: a move rolls
  the tape under it. The tape is a ring of model.memory_size cells or, with
  model.memory_grows, of as many cells as the row's sequence has tokens (its input, <eos>
  and answer slots): each row its own ring, so that a row's answer never depends on the
  others beside it, and a tape that holds any input it is given.

Positions are read nowhere: the forms take no positional scheme (`Recurrent.schemes`).
The forward pass keeps the interface every form keeps (contract.py) and returns, beside
the logits, the memory's contents after every step (`MemoryTrace`).
Shapes: B batch, S source width, T answer width, N = S + T, V vocabulary, H hidden units
(model.d_model), M cells (model.memory_size), C numbers a cell holds (model.memory_cell_size).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ClassVar, NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp

from jabcli.core.errors import JabError
from jabcli.core.settings import ModelConfig
from jabcli.core.tokenizer import EOS_ID, PAD_ID
from jabcli.model.contract import Form, ModelFns
from jabcli.model.encoder_only import answer_slots, slotted
from jabcli.model.positions import PositionalScheme, counting, get_scheme

# The stack's actions, in the order of the paper's softmax.
PUSH, POP, NO_OP = range(3)
# The tape's (the paper's TapeInputLengthJumpCore): each writes the cell under the head,
# then moves the tape.
STAY, LEFT, RIGHT, JUMP_LEFT, JUMP_RIGHT = range(5)
TAPE_MLP = (64, 64)  # the hidden layers that compute the tape's written value


class MemoryTrace(NamedTuple):
    """What a recurrent form has in place of attention weights: its stack's or tape's
    contents after each step [B, N, M, C], cell 0 the top or the head; None for the LSTM."""

    cells: jax.Array | None


def update_stack(stack: jax.Array, actions: jax.Array, value: jax.Array) -> jax.Array:
    """The stack [B, M, C] after the action probabilities [B, 3]: pushing `value` [B, C]
    (every cell moves one down, the bottom one falls off), popping (every cell moves one
    up, zeros come in at the bottom) or neither, mixed by their probabilities."""
    pushed = jnp.concatenate([value[:, None], stack[:, :-1]], axis=1)
    popped = jnp.concatenate([stack[:, 1:], jnp.zeros_like(stack[:, :1])], axis=1)
    weight = actions[:, :, None, None]
    return weight[:, PUSH] * pushed + weight[:, POP] * popped + weight[:, NO_OP] * stack


def update_tape(
    tape: jax.Array,
    actions: jax.Array,
    value: jax.Array,
    jump: jax.Array,
    ring: jax.Array | None = None,
) -> jax.Array:
    """The tape [B, M, C] with `value` [B, C] written in the cell under the head (cell 0),
    then moved by the action probabilities [B, 5]. As in the paper, moving `left` rolls
    the tape by -1 (the head then reads what was cell 1), `right` by +1, and the jumps by
    -jump and +jump cells, `jump` [B] the number of symbols in each row's input; the tape
    is a ring of its M cells or, given `ring` [B], of each row's first ring[b] cells (the
    others stay as they are)."""
    written = tape.at[:, 0].set(value)
    if ring is None:
        left, right = jnp.roll(written, -1, axis=1), jnp.roll(written, 1, axis=1)
    else:
        one = jnp.ones_like(jump)
        left, right = roll_rows(written, -one, ring), roll_rows(written, one, ring)
    moved = [written, left, right, roll_rows(written, -jump, ring), roll_rows(written, jump, ring)]
    weighted = [actions[:, a, None, None] * tape for a, tape in enumerate(moved)]
    return functools.reduce(jnp.add, weighted)


@jax.custom_vjp
def roll_rows(cells: jax.Array, shift: jax.Array, ring: jax.Array | None = None) -> jax.Array:
    """`jnp.roll(cells[b], shift[b], axis=0)` for every row b of cells [B, M, C], or of its
    first ring[b] cells only: a gather, whose gradient is the opposite roll (another
    gather), not the scatter-add JAX would derive, several times slower on the CPU."""
    cell = jnp.arange(cells.shape[1])[None, :]
    if ring is None:
        index = (cell - shift[:, None]) % cells.shape[1]
    else:
        index = jnp.where(cell < ring[:, None], (cell - shift[:, None]) % ring[:, None], cell)
    return jnp.take_along_axis(cells, index[:, :, None], axis=1)


def _roll_rows_forward(cells, shift, ring):
    return roll_rows(cells, shift, ring), (shift, ring)


def _roll_rows_backward(residuals, gradient):
    shift, ring = residuals
    return roll_rows(gradient, -shift, ring), None, None


roll_rows.defvjp(_roll_rows_forward, _roll_rows_backward)


class StackRNNCore(hk.RNNCore):
    """One step of the Stack-RNN: token [B, I] and state (stack [B, M, C], hidden [B, H])
    -> (output [B, H], the new stack [B, M, C]) and the new state."""

    def __init__(self, hidden: int, cells: int, cell_size: int, name: str | None = None):
        super().__init__(name=name)
        self.rnn = hk.VanillaRNN(hidden)
        self.cells, self.cell_size = cells, cell_size

    def __call__(self, token, state):
        stack, hidden = state
        output, hidden = self.rnn(jnp.concatenate([token, stack[:, 0]], axis=-1), hidden)
        value = hk.Linear(self.cell_size, name="push")(output)
        actions = jax.nn.softmax(hk.Linear(3, name="actions")(output), axis=-1)
        stack = update_stack(stack, actions, value)
        return (output, stack), (stack, hidden)

    def initial_state(self, batch_size: int | None):
        """An empty stack (zeros) and the RNN's own initial state."""
        stack = jnp.zeros((batch_size, self.cells, self.cell_size))
        return stack, self.rnn.initial_state(batch_size)


class TapeRNNCore(hk.RNNCore):
    """One step of the Tape-RNN: token [B, I] and state (tape [B, M, C], hidden [B, H])
    -> (output [B, H], the new tape [B, M, C]) and the new state; `jump` [B] is each
    row's input length, which the paper's core keeps in its state, and `ring` [B] each
    row's ring of cells (None: all M)."""

    def __init__(
        self,
        hidden: int,
        cells: int,
        cell_size: int,
        jump: jax.Array,
        ring: jax.Array | None = None,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self.rnn = hk.VanillaRNN(hidden)
        self.cells, self.cell_size, self.jump, self.ring = cells, cell_size, jump, ring

    def __call__(self, token, state):
        tape, hidden = state
        output, hidden = self.rnn(jnp.concatenate([token, tape[:, 0]], axis=-1), hidden)
        value = hk.nets.MLP([*TAPE_MLP, self.cell_size], name="write")(output)
        actions = jax.nn.softmax(hk.Linear(5, name="actions")(output), axis=-1)
        tape = update_tape(tape, actions, value, self.jump, self.ring)
        return (output, tape), (tape, hidden)

    def initial_state(self, batch_size: int | None):
        """A blank tape (zeros) and the RNN's own initial state."""
        tape = jnp.zeros((batch_size, self.cells, self.cell_size))
        return tape, self.rnn.initial_state(batch_size)


class LSTMCore(hk.RNNCore):
    """One step of the LSTM: token [B, I] and its state -> (output [B, H], None)."""

    def __init__(self, hidden: int, name: str | None = None):
        super().__init__(name=name)
        self.lstm = hk.LSTM(hidden)

    def __call__(self, token, state):
        output, state = self.lstm(token, state)
        return (output, None), state

    def initial_state(self, batch_size: int | None):
        return self.lstm.initial_state(batch_size)


class RecurrentModel(hk.Module):
    """Sources and empty answer slots through a recurrent core: src [B, S] and tgt_in
    [B, T] (its width alone) -> (logits [B, T, V] of the answer's tokens, `MemoryTrace`)."""

    def __init__(
        self,
        make_core: Callable[[jax.Array, jax.Array, int], hk.RNNCore],
        vocab_size: int,
        slots: Callable[[jax.Array, int], jax.Array],
        name: str | None = "recurrent",
    ):
        super().__init__(name=name)
        # (each row's input length [B], its tokens [B], the sequence's width) -> the core
        self.make_core = make_core
        self.vocab_size = vocab_size
        self.slots = slots  # (src [B, S], T) -> [B] the slots each source gets

    def __call__(
        self,
        src: jax.Array,
        tgt_in: jax.Array,
        is_training: bool = False,
        src_positions: jax.Array | None = None,
        tgt_positions: jax.Array | None = None,
        src_segments: jax.Array | None = None,
        tgt_segments: jax.Array | None = None,
    ) -> tuple[jax.Array, MemoryTrace]:
        """Positions are not read; rows are never packed (`Recurrent.packs`); there is no
        dropout, so `is_training` changes nothing."""
        if src_segments is not None or tgt_segments is not None:
            raise ValueError("a recurrent form trains on one example per row, never packed")
        batch, answer_width = src.shape[0], tgt_in.shape[1]
        unread = jnp.zeros((batch, answer_width), jnp.int32)
        ids, _, where = slotted(src, jnp.zeros_like(src), self.slots(src, answer_width), unread)
        symbols = jnp.sum((src != PAD_ID) & (src != EOS_ID), axis=1).astype(jnp.int32)
        core = self.make_core(symbols, jnp.sum(ids != PAD_ID, axis=1), ids.shape[1])
        inputs = jax.nn.one_hot(ids, self.vocab_size)
        (outputs, cells), _ = hk.dynamic_unroll(
            core, inputs, core.initial_state(batch), time_major=False
        )
        answers = jnp.take_along_axis(outputs, where[:, :, None], axis=1)  # [B, T, H]
        logits = hk.Linear(self.vocab_size, name="to_logits")(jax.nn.relu(answers))
        return logits, MemoryTrace(cells)


class Recurrent(Form):
    """A recurrent form: every answer token from one pass over the input and its empty
    slots, no positions, never packed. Each form names its core (`make_core`)."""

    one_pass = True
    positional = False
    heads = False
    memory_cells: ClassVar[int] = 0  # the paper's memory_size, for a form with a memory

    def make_core(
        self, m: ModelConfig, symbols: jax.Array, tokens: jax.Array, width: int
    ) -> hk.RNNCore:
        """The form's core, built inside the transformed function; `symbols` [B] is each
        row's input length (the symbols of its source), `tokens` [B] its sequence's
        (input, <eos> and answer slots) and `width` the sequence's columns."""
        raise NotImplementedError

    def cells(self, m: ModelConfig, width: int) -> int:
        """The cells of the form's stack or tape for a sequence of `width` columns:
        model.memory_size, or the paper's, or with model.memory_grows one a column."""
        return width if m.memory_grows else m.memory_size or self.memory_cells

    def check(self, m: ModelConfig) -> None:
        super().check(m)
        if self.memory and m.memory_size == 1:
            raise JabError(
                f"model.memory_size must be 0 (the paper's {self.memory_cells} cells) or at "
                f"least 2 for {self.name}, got 1"
            )
        if m.memory_grows and m.memory_size:
            raise JabError(
                f"model.memory_grows gives {self.name} a cell per step of what it reads: "
                f"leave model.memory_size at 0 (got {m.memory_size})"
            )

    def schemes(self, m: ModelConfig, task) -> tuple[PositionalScheme, PositionalScheme]:
        """No scheme: a recurrent form tells tokens apart by the order it reads them in.
        model.pos_encoding at its default (sinusoidal), which a user who asks for an
        LSTM has not chosen, means nothing, as none does; any other encoding, and
        either side's own, is refused."""
        unset = {"pos_encoding": ("none", ModelConfig().pos_encoding)}
        for key in ("pos_encoding", "src_pos_encoding", "tgt_pos_encoding"):
            value = getattr(m, key)
            if value not in ("", *unset.get(key, ())):
                raise JabError(
                    f"model.arch={self.name} reads no positions: leave model.{key} unset "
                    f"(got {value!r})"
                )
        none = get_scheme("none")
        return none, none

    def build(self, m, src_scheme, tgt_scheme, vocab_size, task) -> ModelFns:
        """An answer is one pass of `forward`: `encode`, `init_cache` and `decode_step`
        are None."""

        def forward(src, tgt_in, **options):
            slots = functools.partial(answer_slots, task)
            model = RecurrentModel(functools.partial(self.make_core, m), vocab_size, slots)
            return model(src, tgt_in, **options)

        transformed = hk.transform(forward)
        return ModelFns(transformed.init, transformed.apply, None, None, None)

    def positions_needed(self, src_scheme, tgt_scheme, source: int, answer: int) -> int:
        """None: model.max_positions bounds no input of a recurrent form (the memory
        decoding takes does, `decode_bytes`)."""
        return 0

    def positions(self, key, src_scheme, tgt_scheme, task, src, answer_width, limit):
        """0, 1, 2, ... on either side, which the model never reads."""
        return counting(*src.shape), counting(src.shape[0], answer_width)

    def drawn_layers(self, m: ModelConfig) -> int:
        """One: a stack's or tape's contents are drawn, not layers (model.num_layers,
        recorded at its default, means nothing here)."""
        return 1

    def decode_bytes(self, m: ModelConfig, src_width: int, answer_width: int) -> int:
        """Every step's one-hot token (a vocabulary of about 64) and output, twice over
        for the scan's copies, and the memory. Decoding drops the `MemoryTrace`: XLA
        keeps no step's memory it is not asked for."""
        n = src_width + answer_width
        memory = self.cells(m, n) * m.memory_cell_size if self.memory else 0
        return 4 * (2 * n * (64 + m.d_model) + memory)


class LSTM(Recurrent):
    """`model.arch=lstm`: the paper's LSTM."""

    name = "lstm"
    label = "LSTM"

    def make_core(self, m, symbols, tokens, width):
        return LSTMCore(m.d_model)


class StackRNN(Recurrent):
    """`model.arch=stack_rnn`: the paper's Stack-RNN, one stack of 30 cells by default
    (its StackRNNCore's stack_size)."""

    name = "stack_rnn"
    label = "Stack-RNN"
    memory = True
    attention = ("stack",)  # its memory, drawn in attention's place
    memory_cells = 30

    def make_core(self, m, symbols, tokens, width):
        return StackRNNCore(m.d_model, self.cells(m, width), m.memory_cell_size)


class TapeRNN(Recurrent):
    """`model.arch=tape_rnn`: the paper's Tape-RNN, one tape of 40 cells by default (its
    experiments/example.py's memory_size)."""

    name = "tape_rnn"
    label = "Tape-RNN"
    memory = True
    attention = ("tape",)  # its memory, drawn in attention's place
    memory_cells = 40

    def make_core(self, m, symbols, tokens, width):
        ring = tokens.astype(jnp.int32) if m.memory_grows else None
        return TapeRNNCore(m.d_model, self.cells(m, width), m.memory_cell_size, symbols, ring)
