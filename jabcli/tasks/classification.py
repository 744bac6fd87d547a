"""The tasks whose answer is one symbol, the class of the input (the classification tasks
of Delétang et al. 2023, "Neural Networks and the Chomsky Hierarchy"): `Classify`, and
`Worked`, a class task that can show its working first (`task.scratchpad`); parity,
pairs, a cycle and a missing duplicate on them. The expressions modulo a number are
class tasks too, in modular.py."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING

from jabcli.core.errors import JabError
from jabcli.core.runtime import Lazy
from jabcli.core.tokenizer import PAD_ID
from jabcli.tasks.batch import UNALIGNED, columns, source_lengths
from jabcli.tasks.contract import Task

if TYPE_CHECKING:
    import jax
    import jax.numpy as jnp
else:
    jax, jnp = Lazy("jax"), Lazy("jax.numpy")


@dataclass(frozen=True)
class Classify(Task):
    """A task whose answer is one symbol, the class of its input (the classification
    tasks of Delétang et al. 2023, "Neural Networks and the Chomsky Hierarchy"): the decoder
    writes the class and <eos>. Subclasses say how a row of symbol values [batch, L]
    and its length map to a class (`classify`), or draw sources and their classes
    together (`draw`)."""

    fixed_alphabet = True
    level = "regular"

    @property
    def classes(self) -> str:
        """The answer symbols, class 0, 1, ... (a subclass may set it as a class
        attribute, or compute it from its options)."""
        return "01"

    def output_length(self, length):
        return length * 0 + 1  # an int for an int, an array for an array

    def classify(self, values: jax.Array, valid: jax.Array) -> jax.Array:
        """[batch] classes of rows of symbol values [batch, L], `valid` where a symbol is."""
        raise NotImplementedError

    def targets(self, tokens, lengths):
        found = self.classify(*self.values(tokens, lengths))
        return self.class_ids[found][:, None], jnp.ones_like(lengths)

    def values(self, tokens: jax.Array, lengths: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Source ids [batch, L] -> each symbol's place in the alphabet (0 past the end)
        and where a symbol is, [batch, L] each."""
        values = jnp.argmax(tokens[:, :, None] == self.symbol_ids[None, None, :], axis=-1)
        valid = columns(tokens) < lengths[:, None]
        return jnp.where(valid, values, 0), valid

    @property
    def class_ids(self) -> jax.Array:
        """[classes] the token ids of the answer symbols."""
        return jnp.asarray(self.tokenizer.ids(self.classes), jnp.int32)


@dataclass(frozen=True)
class Worked(Classify):
    """A class task that can show its working (`task.scratchpad`, after the scratchpads of
    Nye et al. 2021): the answer writes, under each input symbol, where the computation
    stands after it, then the class. Each symbol of the working follows from the input
    symbol above it and the working just before it (the bracket tasks: also the working
    before the matching `(`), so the task is aligned (coupled positions apply). The
    model is told the intermediate results: supervision the bare task does not give.
    Subclasses define the class of a text (`value`) and the working, as plain Python
    (`shown`) and as array code (`working`; or `draw`, where inputs and their working
    come from one generator: the expressions with brackets)."""

    scratchpad: bool = False

    def value(self, text: str) -> str | None:
        """The class of `text`; None when it is not a valid input."""
        raise NotImplementedError

    def shown(self, text: str) -> str:
        """The working of a valid `text`, one symbol per input symbol."""
        raise NotImplementedError

    def working(self, values: jax.Array, valid: jax.Array) -> jax.Array:
        """Rows of symbol values [batch, L] -> the class index under each symbol [batch, L]."""
        raise NotImplementedError

    def solve(self, text):
        value = self.value(text)
        return self.shown(text) + value if value is not None and self.scratchpad else value

    def output_length(self, length):
        return length + 1 if self.scratchpad else super().output_length(length)

    def alignment(self, src, width):
        """Each symbol of the working stands under its input symbol; the class after them
        (aligned only with `task.scratchpad`, see derived.aligned)."""
        lengths = source_lengths(src)[:, None]
        source = jnp.where(columns(src) < lengths, columns(src), UNALIGNED)
        steps = columns(src, width)
        answer = jnp.where(steps <= lengths, steps, UNALIGNED)
        return source.astype(jnp.int32), answer.astype(jnp.int32)

    def targets(self, tokens, lengths):
        if not self.scratchpad:
            return super().targets(tokens, lengths)
        values, valid = self.values(tokens, lengths)
        shown = then_class(self.working(values, valid), self.classify(values, valid), lengths)
        return self.class_ids[shown], lengths + 1


def then_class(working: jax.Array, found: jax.Array, lengths: jax.Array) -> jax.Array:
    """A worked answer: the working [batch, L] up to each row's length, then its class
    (`found`, [batch]) there and after: [batch, L + 1], symbol indices."""
    under = jnp.pad(working, ((0, 0), (0, 1)))
    return jnp.where(columns(under) < lengths[:, None], under, found[:, None])


@dataclass(frozen=True)
class ParityCheck(Worked):
    """With `task.scratchpad`, the parity so far under each symbol: 1011 -> 11011."""

    name = "parity_check"
    description = "Are there an odd number of 1s? 1011 -> 1"
    default_alphabet = "01"

    def value(self, text):
        return str(text.count("1") % 2)

    def shown(self, text):
        return "".join(str(text[: i + 1].count("1") % 2) for i in range(len(text)))

    def classify(self, values, valid):
        return jnp.sum(values * valid, axis=1) % 2

    def working(self, values, valid):
        return jnp.cumsum(values * valid, axis=1) % 2


@dataclass(frozen=True)
class EvenPairs(Worked):
    """With `task.scratchpad`, the parity of the changes so far under each symbol:
    0110 -> 01100."""

    name = "even_pairs"
    description = "Are there an odd number of 01s and 10s? 0110 -> 0"
    default_alphabet = "01"

    def value(self, text):
        return str(sum(a != b for a, b in pairwise(text)) % 2)

    def shown(self, text):
        return "".join(self.value(text[: i + 1]) for i in range(len(text)))

    def classify(self, values, valid):
        return self.working(values, valid)[:, -1]

    def working(self, values, valid):
        changes = (values[:, 1:] != values[:, :-1]) & valid[:, 1:]
        return jnp.pad(jnp.cumsum(changes, axis=1), ((0, 0), (1, 0))) % 2


@dataclass(frozen=True)
class CycleNavigation(Worked):
    """Steps around a cycle of 5 places from place 0: symbol 0 steps back, 1 stays, 2
    steps on; the answer is the place reached (as in the paper's encoding). With
    `task.scratchpad`, the place reached so far under each step: 2202 -> 12122."""

    name = "cycle_navigation"
    description = "Where on a cycle of 5 do the steps end? 2202 -> 2"
    default_alphabet = "012"
    classes = "01234"

    def value(self, text):
        return str(sum(int(step) - 1 for step in text) % 5)

    def shown(self, text):
        return "".join(self.value(text[: i + 1]) for i in range(len(text)))

    def classify(self, values, valid):
        return jnp.sum((values - 1) * valid, axis=1) % 5

    def working(self, values, valid):
        return jnp.cumsum((values - 1) * valid, axis=1) % 5


@dataclass(frozen=True)
class MissingDuplicate(Worked):
    """A binary string written twice with one symbol left out (`_`); the answer is the
    symbol left out. Odd lengths end in a filler symbol `#` (the paper's format).

    Every other symbol is written twice, so the 1s number an odd count exactly when the
    symbol left out is a 1: the answer is also the parity of the 1s. With
    `task.scratchpad`, the working is that parity so far: 0110_110 -> 01000100 then 0.
    Not the task's intended algorithm (matching each symbol with its twin), but one its
    binary alphabet admits."""

    name = "missing_duplicate"
    level = "CS"
    description = "The symbol left out of a string written twice: 0110_110 -> 0"
    default_alphabet = "01_#"
    min_length = 2

    def check_input(self, text):
        if self.value(text) is None:
            raise JabError(
                f"missing_duplicate takes a binary string written twice with one symbol "
                f"replaced by _ (and # after it when the length is odd), like 0110_110; "
                f"got {text!r}"
            )

    def value(self, text):
        body = text[:-1] if len(text) % 2 else text
        half = len(body) // 2
        if (len(text) % 2 and text[-1] != "#") or not half or body.count("_") != 1:
            return None
        first, second = body[:half], body[half:]
        if set(first + second) - set("01_"):
            return None
        if "_" in first:
            missing, other = first, second
        else:
            missing, other = second, first
        at = missing.index("_")
        if missing[:at] + missing[at + 1 :] != other[:at] + other[at + 1 :]:
            return None
        return other[at]

    def draw(self, key, lengths, max_len):
        bit_key, missing_key = jax.random.split(key)
        half = (lengths // 2)[:, None]
        bits = jax.random.randint(bit_key, (lengths.shape[0], max_len), 0, 2)
        i = columns(bits)
        values = jnp.take_along_axis(bits, i % jnp.maximum(half, 1), axis=1)
        missing = jax.random.randint(missing_key, lengths.shape, 0, 2 * half[:, 0])[:, None]
        values = jnp.where(i == missing, 2, values)  # _
        values = jnp.where(i == 2 * half, 3, values)  # # after an odd length's pairs
        tokens = jnp.where(i < lengths[:, None], self.symbol_ids[values], PAD_ID)
        return (tokens, *self.targets(tokens, lengths))

    def classify(self, values, valid):
        half = (jnp.sum(valid, axis=1) // 2)[:, None]
        missing = jnp.argmax((values == 2) & valid, axis=1)[:, None]
        other = jnp.where(missing < half, missing + half, missing - half)
        return jnp.take_along_axis(values, other, axis=1)[:, 0]

    def shown(self, text):
        return "".join(str(text[: i + 1].count("1") % 2) for i in range(len(text)))

    def working(self, values, valid):
        return jnp.cumsum((values == 1) & valid, axis=1) % 2
