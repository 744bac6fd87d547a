"""Index hints (`task.index_hints`, after Zhou et al. 2024): a wrapper around a task that
numbers its input and its answer, and how the numbers are drawn."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jabcli.core.runtime import Lazy
from jabcli.core.tokenizer import HINTS, PAD_ID
from jabcli.tasks.batch import columns
from jabcli.tasks.contract import Task

if TYPE_CHECKING:
    import jax
    import jax.numpy as jnp
else:
    jax, jnp = Lazy("jax"), Lazy("jax.numpy")


@dataclass(frozen=True)
class Hinted(Task):
    """A task with index hints, wrapping the task it hints: every source symbol is
    preceded by an index hint, increasing along the source (`draw_hints`), and every
    answer symbol by the hint of the source symbol it is. The model is not told where to
    read: it writes the index itself and finds it in the input. Only tasks whose answer
    symbols are input symbols (`reads`) take it. Everything else is the wrapped task's;
    each symbol takes two tokens (derived.py counts them)."""

    task: Task = field(default_factory=Task)

    def __post_init__(self) -> None:
        object.__setattr__(self, "alphabet", self.task.alphabet)
        object.__setattr__(self, "tokenizer", self.task.tokenizer)

    name = property(lambda self: self.task.name)
    label = property(lambda self: self.task.label)
    description = property(lambda self: self.task.description)
    min_length = property(lambda self: self.task.min_length)

    def solve(self, text):
        return self.task.solve(text)

    def check_input(self, text):
        self.task.check_input(text)

    def output_length(self, length):
        return self.task.output_length(length)

    def targets(self, tokens, lengths):
        return self.task.targets(tokens, lengths)

    def reads(self, steps, lengths):
        return self.task.reads(steps, lengths)

    def draw(self, key, lengths, max_len):
        """The wrapped task's sources and answers (drawn as it draws them), with index
        hints (`draw_hints`) before the source symbols; each answer symbol gets the hint
        of the source symbol it reads."""
        key, hint_key = jax.random.split(key)
        tokens, target, target_lengths = self.task.draw(key, lengths, max_len)
        start = self.tokenizer.hint_start
        assert start is not None, "a hinted task's vocabulary holds the hints"
        hints = start + draw_hints(hint_key, lengths, max_len)
        read = self.reads(columns(target), lengths[:, None])
        answer_hints = jnp.take_along_axis(hints, jnp.clip(read, 0, max_len - 1), axis=1)
        source = interleave(hints, tokens, lengths)
        return source, interleave(answer_hints, target, target_lengths), 2 * target_lengths

    def with_hints(self, rows: list[list[int]], key: jax.Array) -> list[list[int]]:
        """Users' source ids with index hints, drawn from `key` as training draws them."""
        lengths = jnp.asarray([len(row) for row in rows])
        assert self.tokenizer.hint_start is not None  # a hinted run's vocabulary has them
        hints = self.tokenizer.hint_start + draw_hints(key, lengths, max(map(len, rows)))
        return [
            [token for hint, i in zip(drawn, row) for token in (hint, i)]
            for drawn, row in zip(hints.tolist(), rows)
        ]


def draw_hints(key: jax.Array, lengths: jax.Array, width: int) -> jax.Array:
    """[batch, width] hint numbers: row b holds lengths[b] distinct numbers in increasing
    order (the rest is filler), a random subset of a random window of [0, HINTS) at least
    that long. Long inputs use most hints, close together; short ones, drawn this way,
    hold hints both far apart and side by side, so that the model learns to tell apart
    hints that only long inputs hold together (n hints in a row would never put two
    hints 17 apart into an input of 16). Hints near either end are drawn less often
    than the others, but every one is drawn."""
    span_key, offset_key, pick_key = jax.random.split(key, 3)
    span = jax.random.randint(span_key, lengths.shape, lengths, HINTS + 1)[:, None]
    offset = jax.random.randint(offset_key, lengths.shape, 0, HINTS - span[:, 0] + 1)[:, None]
    scores = jax.random.uniform(pick_key, (lengths.shape[0], HINTS))
    scores = jnp.where(jnp.arange(HINTS)[None, :] < span, scores, 2.0)  # never outside
    _, picked = jax.lax.top_k(-scores, width)  # the lowest scores: a random subset
    picked = jnp.where(columns(picked) < lengths[:, None], picked, HINTS)
    return jnp.minimum(jnp.sort(picked, axis=1) + offset, HINTS - 1).astype(jnp.int32)


def interleave(hints: jax.Array, symbols: jax.Array, lengths: jax.Array) -> jax.Array:
    """[batch, W] hints and symbols -> [batch, 2W]: hint, symbol, hint, ... for the first
    `lengths` symbols of each row, <pad> after."""
    pairs = jnp.stack([hints, symbols], axis=2).reshape(symbols.shape[0], -1)
    return jnp.where(columns(pairs) < 2 * lengths[:, None], pairs, PAD_ID)
