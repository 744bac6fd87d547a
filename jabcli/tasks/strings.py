"""The tasks on strings: copying, reversing, duplicating, rotating, reordering and
sorting symbols, and running a stack. Each is one small class on the contract of
contract.py; most answers are input symbols, so they say which one (`reads`) and get
index hints and coupled positions from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from jabcli.core.errors import JabError
from jabcli.core.runtime import Lazy
from jabcli.core.tokenizer import PAD_ID
from jabcli.tasks.batch import columns, gather
from jabcli.tasks.contract import Task

if TYPE_CHECKING:
    import jax
    import jax.numpy as jnp
else:
    jax, jnp = Lazy("jax"), Lazy("jax.numpy")


class Copy(Task):
    name = "copy"
    description = "Repeat the input: 3141 -> 3141"

    def solve(self, text):
        return text

    def targets(self, tokens, lengths):
        return tokens, lengths

    def reads(self, steps, lengths):
        return jnp.broadcast_to(steps, (lengths.shape[0], steps.shape[1]))


class Reverse(Task):
    name = "reverse"
    level = "DCF"
    description = "Reverse the input: 3141 -> 1413"

    def solve(self, text):
        return text[::-1]

    def targets(self, tokens, lengths):
        return gather(tokens, self.reads(columns(tokens), lengths[:, None]), lengths), lengths

    def reads(self, steps, lengths):
        return lengths - 1 - steps


class Duplicate(Task):
    name = "duplicate"
    level = "CS"
    description = "Write the input twice: 314 -> 314314"

    def solve(self, text):
        return text + text

    def output_length(self, length):
        return 2 * length

    def targets(self, tokens, lengths):
        index = self.reads(columns(tokens, 2 * tokens.shape[1]), lengths[:, None])
        return gather(tokens, index, 2 * lengths), 2 * lengths

    def reads(self, steps, lengths):
        return steps % jnp.maximum(lengths, 1)


@dataclass(frozen=True)
class Shift(Task):
    """Rotate left by `shift` places (`task.shift`), wrapping around."""

    shift: int = 1
    name = "shift"
    description = "Rotate left by task.shift places: 31415 -> 14153"

    def solve(self, text):
        k = self.shift % len(text)
        return text[k:] + text[:k]

    def targets(self, tokens, lengths):
        return gather(tokens, self.reads(columns(tokens), lengths[:, None]), lengths), lengths

    def reads(self, steps, lengths):
        return (steps + self.shift) % jnp.maximum(lengths, 1)


@dataclass(frozen=True)
class OddsFirst(Task):
    """The symbols at odd positions, then those at even ones, positions counted from
    `task.count_from`: 1 as the paper's docstring counts (31415 -> 34511), 0 as the code
    its experiments ran counts (`s[1::2] + s[0::2]`: 31415 -> 11345)."""

    count_from: int = 1
    name = "odds_first"
    level = "CS"
    description = "Odd positions, then even: 31415 -> 34511"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.count_from not in (0, 1):
            raise JabError(f"task.count_from must be 0 or 1, got {self.count_from}")

    def solve(self, text):
        first = 1 - self.count_from  # the index of the first odd position
        return text[first::2] + text[1 - first :: 2]

    def targets(self, tokens, lengths):
        return gather(tokens, self.reads(columns(tokens), lengths[:, None]), lengths), lengths

    def reads(self, steps, lengths):
        first = 1 - self.count_from
        odds = (lengths + self.count_from) // 2
        return jnp.where(steps < odds, 2 * steps + first, 2 * (steps - odds) + 1 - first)


class Sort(Task):
    name = "sort"
    description = "Sort the symbols, keeping duplicates: 3141 -> 1134"

    def solve(self, text):
        return "".join(sorted(text))

    def targets(self, tokens, lengths):
        # Ids follow code-point order (see tokenizer), so sorting ids sorts characters.
        padded_last = jnp.where(tokens == PAD_ID, jnp.iinfo(jnp.int32).max, tokens)
        ordered = jnp.sort(padded_last, axis=1, stable=True)
        return jnp.where(ordered == jnp.iinfo(jnp.int32).max, PAD_ID, ordered), lengths


class BucketSort(Sort):
    name = "bucket_sort"
    level = "CS"
    description = "Sort, many duplicates: 2010210 -> 0001122"
    default_alphabet = "012"


@dataclass(frozen=True)
class StackManipulation(Task):
    """A stack, bottom first, then actions on it (`-` pops, `a` pushes 0, `b` pushes 1;
    a pop of the empty stack does nothing); the answer is the stack at the end, top
    first. An empty stack is an empty answer: the decoder writes <eos> alone."""

    name = "stack_manipulation"
    level = "DCF"
    description = "Run a: push 0, b: push 1, -: pop on a stack; answer top first: 011b-- -> 10"
    end_scored = True  # the paper's answer ends in a marker, scored like a symbol
    default_alphabet = "01-ab"
    fixed_alphabet = True
    actions: ClassVar[str] = "-ab"
    classes: ClassVar[str] = "01"  # what its answers are written in (derived.answer_symbols)

    def check_input(self, text):
        stack = text.rstrip(self.actions)
        if not stack or set(stack) - set("01"):
            raise JabError(
                "stack_manipulation takes a stack of 0s and 1s, then actions "
                f"(a: push 0, b: push 1, -: pop), like 011b--; got {text!r}"
            )

    def solve(self, text):
        stack: list[str] = []
        for symbol in text:
            if symbol == "-":
                if stack:
                    stack.pop()
            else:
                stack.append({"a": "0", "b": "1"}.get(symbol, symbol))
        return "".join(reversed(stack))

    def draw(self, key, lengths, max_len):
        stack_key, bit_key, action_key = jax.random.split(key, 3)
        # The paper's draw: a stack of 1 to length - 1 symbols (1 for length 1), then actions.
        stack = jax.random.randint(stack_key, lengths.shape, 1, jnp.maximum(lengths, 2))
        bits = jax.random.randint(bit_key, (lengths.shape[0], max_len), 0, 2)
        actions = jax.random.randint(action_key, (lengths.shape[0], max_len), 2, 5)
        i = columns(bits)
        values = jnp.where(i < stack[:, None], bits, actions)  # 0, 1, then 2 -, 3 a, 4 b
        valid = i < lengths[:, None]
        tokens = jnp.where(valid, self.symbol_ids[values], PAD_ID)
        rows = jnp.arange(lengths.shape[0])

        def act(state, column):
            stack, top = state  # [batch, max_len] values and [batch] the stack's height
            value, here = column
            push = here & (value != 2)
            pop = here & (value == 2) & (top > 0)
            at = jnp.minimum(top, max_len - 1)
            pushed = jnp.where(value > 2, value - 3, value)
            stack = stack.at[rows, at].set(jnp.where(push, pushed, stack[rows, at]))
            return (stack, top + push - pop), None

        start = (jnp.zeros_like(bits), jnp.zeros_like(lengths))
        (final, height), _ = jax.lax.scan(act, start, (values.T, valid.T))
        answer = gather(final, height[:, None] - 1 - i, height)
        return tokens, jnp.where(i < height[:, None], self.symbol_ids[answer], PAD_ID), height
