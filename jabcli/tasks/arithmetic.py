"""Tasks on numbers: decimal addition and the binary arithmetic of Delétang et al. 2023
("Neural Networks and the Chomsky Hierarchy": addition, multiplication and square root
of binary numbers). Its expressions modulo a number are in modular.py.

As every task's, the samplers are array code, drawn inside the jitted train step:
numbers are rows of digits, carries and stacks are `lax.scan`s along the row.
`solve` is plain Python (integers, a recursive parser) to test them against.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from jabcli.core.errors import JabError
from jabcli.core.runtime import Lazy
from jabcli.core.tokenizer import PAD_ID
from jabcli.tasks.batch import UNALIGNED, columns, gather, source_lengths
from jabcli.tasks.contract import Task

if TYPE_CHECKING:
    import jax
    import jax.numpy as jnp
else:
    jax, jnp = Lazy("jax"), Lazy("jax.numpy")


@dataclass(frozen=True)
class Addition(Task):
    """Decimal a+b; with `task.reverse_answer` the sum is written least significant digit first.

    A source of length L is a+b with len(a) + len(b) = L - 1, so L >= 3. Numbers have
    no leading zeros.
    """

    reverse_answer: bool = False
    name = "addition"
    description = "Add two numbers: 57+68 -> 125"
    default_alphabet = "+0123456789"
    fixed_alphabet = True
    min_length = 3

    def check_input(self, text):
        a, plus, b = text.partition("+")
        if not (plus and a.isdigit() and b.isdigit()):
            raise JabError(f"addition takes inputs like 57+68, got {text!r}")

    def solve(self, text):
        a, _, b = text.partition("+")
        total = str(int(a) + int(b))
        return total[::-1] if self.reverse_answer else total

    def output_length(self, length):
        return length - 1  # the sum has at most one digit more than the longer term

    def draw(self, key, lengths, max_len):
        plus_id = self.tokenizer.ids("+")[0]
        digit_ids = jnp.asarray(self.tokenizer.ids("0123456789"), jnp.int32)
        split_key, a_key, b_key = jax.random.split(key, 3)
        a_len = jax.random.randint(split_key, lengths.shape, 1, lengths - 1)
        b_len = lengths - 1 - a_len
        a_digits = random_number(a_key, a_len, max_len)
        b_digits = random_number(b_key, b_len, max_len)
        tokens = expression(a_digits, b_digits, a_len, lengths, digit_ids, plus_id)
        # Add least significant digit first, carrying along the row.
        i = columns(a_digits)
        a_low = gather(a_digits, a_len[:, None] - 1 - i, a_len, fill=0)
        b_low = gather(b_digits, b_len[:, None] - 1 - i, b_len, fill=0)
        sum_low = carry(a_low + b_low, 10)  # [batch, max_len], least significant first
        sum_len = digit_count(sum_low)
        order = i if self.reverse_answer else sum_len[:, None] - 1 - i
        return tokens, gather(digit_ids[sum_low], order, sum_len), sum_len

    def alignment(self, src, width):
        """Digit k of each term (k = 0 least significant) and of the sum share index k.
        Least significant first, answer step t writes digit t (and step m + 1, past the
        longer term's m digits, the <eos> after a carry). Most significant first, the
        sum has m or m + 1 digits, which the input alone does not tell: step t is given
        index m - t, the digit it writes when the sum has m + 1 digits."""
        plus_id = self.tokenizer.ids("+")[0]
        i = columns(src)
        lengths = source_lengths(src)[:, None]
        a_len = jnp.argmax(src == plus_id, axis=1)[:, None]
        significance = jnp.where(i < a_len, a_len - 1 - i, lengths - 1 - i)
        digit = (i < lengths) & (i != a_len)
        source = jnp.where(digit, significance, UNALIGNED)
        longer = jnp.maximum(a_len, lengths - 1 - a_len)
        steps = columns(src, width)
        index = steps if self.reverse_answer else longer - steps
        answer = jnp.where(steps <= longer + 1, index, UNALIGNED)
        return source.astype(jnp.int32), answer.astype(jnp.int32)


def expression(
    a: jax.Array,
    b: jax.Array,
    a_len: jax.Array,
    lengths: jax.Array,
    digit_ids: jax.Array,
    operator_id: int,
) -> jax.Array:
    """Source ids [batch, W] of `a`, the operator, then `b`: digit values a and b
    [batch, W] (a's first a_len of them, b's the rest of `lengths`), <pad> after."""
    i = columns(a)
    b_here = jnp.take_along_axis(b, jnp.clip(i - a_len[:, None] - 1, 0, None), axis=1)
    digits = jnp.where(i < a_len[:, None], a, b_here)
    tokens = jnp.where(i == a_len[:, None], operator_id, digit_ids[digits])
    return jnp.where(i < lengths[:, None], tokens, PAD_ID)


def carry(counts: jax.Array, base: int = 2) -> jax.Array:
    """Non-negative counts per digit [batch, W], least significant first -> the digits in
    `base` of their sum [batch, W] (the sum must fit in W digits)."""

    def add(carried, column):
        total = column + carried
        return total // base, total % base

    _, digits = jax.lax.scan(add, jnp.zeros_like(counts[:, 0]), counts.T)
    return digits.T


def digit_count(digits: jax.Array) -> jax.Array:
    """[batch] digits needed to write each number of `digits` [batch, W], least
    significant first (at least 1)."""
    return jnp.maximum(1, jnp.max(jnp.where(digits > 0, columns(digits) + 1, 0), axis=1))


def random_number(key: jax.Array, lengths: jax.Array, width: int) -> jax.Array:
    """Digit values [batch, width], most significant first, no leading zero; 0 past `lengths`."""
    digits = jax.random.randint(key, (lengths.shape[0], width), 0, 10)
    lead = jax.random.randint(jax.random.fold_in(key, 1), (lengths.shape[0],), 1, 10)
    digits = digits.at[:, 0].set(jnp.where(lengths > 1, lead, digits[:, 0]))
    return jnp.where(columns(digits) < lengths[:, None], digits, 0)


# Binary numbers, least significant bit first (the paper's little-endian notation).


def random_bits(key: jax.Array, lengths: jax.Array, width: int) -> jax.Array:
    """Bits [batch, width] of numbers of `lengths` bits, 0 past them: as in the paper,
    uniform among the numbers that are not 0 (a row of zeros is drawn again; fewer than
    two draws on average), leading zeros allowed."""

    def zero(bits):
        return ~jnp.any(bits > 0, axis=1) & (lengths > 0)

    def draw(state):
        key, bits = state
        key, now = jax.random.split(key)
        fresh = jax.random.randint(now, bits.shape, 0, 2)
        fresh = jnp.where(columns(fresh) < lengths[:, None], fresh, 0)
        return key, jnp.where(zero(bits)[:, None], fresh, bits)

    start = jnp.zeros((lengths.shape[0], width), jnp.int32)
    _, bits = jax.lax.while_loop(lambda state: jnp.any(zero(state[1])), draw, (key, start))
    return bits


@dataclass(frozen=True)
class Binary(Task):
    """Two binary numbers, each and the answer least significant bit first, as in the
    paper (terms may end in zeros, the answer does not); `operator` between them and
    `combine` say which operation. A source of length L has terms of 1 to L - 2 bits,
    so L >= 3."""

    level = "CS"
    fixed_alphabet = True
    min_length = 3
    operator: ClassVar[str] = ""
    end_scored = True  # the paper's answer ends in a marker, scored like a symbol
    classes: ClassVar[str] = "01"  # what its answers are written in (derived.answer_symbols)

    def check_input(self, text):
        a, op, b = text.partition(self.operator)
        if not (op and a and b and set(a + b) <= {"0", "1"}):
            raise JabError(
                f"{self.name} takes two binary numbers, least significant bit first, "
                f"like 01{self.operator}11; got {text!r}"
            )

    def combine(self, a: int, b: int) -> int:
        raise NotImplementedError

    def solve(self, text):
        a, _, b = text.partition(self.operator)
        return f"{self.combine(int(a[::-1], 2), int(b[::-1], 2)):b}"[::-1]

    def output_length(self, length):
        return length - 1  # a bit more than the longer term; or all the terms' bits

    def answer_bits(self, a: jax.Array, b: jax.Array) -> jax.Array:
        """[batch, W] bits of the answer to terms a and b [batch, W], low bit first."""
        raise NotImplementedError

    def draw(self, key, lengths, max_len):
        split_key, a_key, b_key = jax.random.split(key, 3)
        a_len = jax.random.randint(split_key, lengths.shape, 1, lengths - 1)
        b_len = lengths - 1 - a_len
        a = random_bits(a_key, a_len, max_len)
        b = random_bits(b_key, b_len, max_len)
        bit_ids = jnp.asarray(self.tokenizer.ids("01"), jnp.int32)
        operator_id = self.tokenizer.ids(self.operator)[0]
        tokens = expression(a, b, a_len, lengths, bit_ids, operator_id)
        answer = self.answer_bits(a, b)
        answer_len = digit_count(answer)
        i = columns(a)
        return tokens, jnp.where(i < answer_len[:, None], bit_ids[answer], PAD_ID), answer_len


@dataclass(frozen=True)
class BinaryAddition(Binary):
    name = "binary_addition"
    description = "Add two binary numbers, least significant bit first: 01+11 -> 101"
    default_alphabet = "01+"
    operator = "+"

    def combine(self, a, b):
        return a + b

    def answer_bits(self, a, b):
        return carry(jnp.pad(a + b, ((0, 0), (0, 1))))[:, : a.shape[1]]

    def alignment(self, src, width):
        """Bit k of each term and of the sum share index k: answer step t writes bit t
        (and step m + 1, past the longer term's m bits, the <eos> after a carry)."""
        operator = self.tokenizer.ids(self.operator)[0]
        i = columns(src)
        lengths = source_lengths(src)[:, None]
        a_len = jnp.argmax(src == operator, axis=1)[:, None]
        bit = (i < lengths) & (i != a_len)
        source = jnp.where(bit, jnp.where(i < a_len, i, i - a_len - 1), UNALIGNED)
        longer = jnp.maximum(a_len, lengths - 1 - a_len)
        steps = columns(src, width)
        answer = jnp.where(steps <= longer + 1, steps, UNALIGNED)
        return source.astype(jnp.int32), answer.astype(jnp.int32)


@dataclass(frozen=True)
class BinaryMultiplication(Binary):
    """No alignment: bit k of a product reads every lower bit of both terms."""

    name = "binary_multiplication"
    description = "Multiply two binary numbers, least significant bit first: 01*11 -> 011"
    default_alphabet = "01*"
    operator = "*"

    def combine(self, a, b):
        return a * b

    def answer_bits(self, a, b):
        # Long multiplication: bit k of the product gathers a_i * b_(k-i) over i, then
        # carries. The counts are a convolution, taken by FFT: exact after rounding, as
        # every count is at most the width (tested against Python's integers at 500 bits).
        size = 2 * a.shape[1]
        spectrum = jnp.fft.rfft(a, size) * jnp.fft.rfft(b, size)
        counts = jnp.round(jnp.fft.irfft(spectrum, size)).astype(jnp.int32)
        return carry(counts)[:, : a.shape[1]]


@dataclass(frozen=True)
class ComputeSqrt(Task):
    """The square root of a binary number (most significant bit first, leading zeros
    allowed, never 0), rounded down and written in ceil(L / 2) bits: the paper's task."""

    name = "compute_sqrt"
    level = "CS"
    description = "Square root of a binary number, rounded down: 100101 -> 110"
    default_alphabet = "01"
    fixed_alphabet = True

    def check_input(self, text):
        if set(text) - {"0", "1"}:
            raise JabError(f"compute_sqrt takes a binary number like 100101; got {text!r}")

    def solve(self, text):
        return f"{math.isqrt(int(text, 2)):0{self.output_length(len(text))}b}"

    def output_length(self, length):
        return (length + 1) // 2

    def draw(self, key, lengths, max_len):
        bits = random_bits(key, lengths, max_len)  # low bit first
        pairs = (max_len + 1) // 2
        root = square_root(jnp.pad(bits, ((0, 0), (0, 2 * pairs - max_len))))
        i = columns(bits)
        bit_ids = jnp.asarray(self.tokenizer.ids("01"), jnp.int32)
        tokens = jnp.where(
            i < lengths[:, None], bit_ids[gather(bits, lengths[:, None] - 1 - i, lengths)], PAD_ID
        )
        out_len = self.output_length(lengths)
        answer = bit_ids[gather(root, out_len[:, None] - 1 - columns(root), out_len)]
        answer = jnp.where(columns(root) < out_len[:, None], answer, PAD_ID)
        return tokens, answer, out_len


LIMB = 15  # bits per int32 limb of a long number: a limb minus a limb minus 1 stays exact


def square_root(bits: jax.Array) -> jax.Array:
    """Bits [batch, 2P] of numbers, low bit first -> the bits [batch, P] of their square
    roots rounded down: the digit-by-digit method, two bits of the number at a time from
    the top, on numbers held in limbs of LIMB bits (no integer type holds 500 bits)."""
    pairs = bits.shape[1] // 2
    limbs = -(-(pairs + 3) // LIMB)  # the remainder stays below 4 * (2 * root + 1)
    mask = (1 << LIMB) - 1

    def shift(number, by):  # number * 2**by, for by < LIMB
        lower = jnp.pad(number, ((0, 0), (1, 0)))[:, :-1]
        return ((number << by) & mask) | (lower >> (LIMB - by))

    def subtract(a, b):  # a - b, and whether a >= b
        borrow, limbs_out = jnp.zeros_like(a[:, 0]), []
        for k in range(a.shape[1]):
            difference = a[:, k] - b[:, k] - borrow
            borrow = (difference < 0).astype(a.dtype)
            limbs_out.append(difference + (borrow << LIMB))
        return jnp.stack(limbs_out, axis=1), borrow == 0

    def step(state, pair):
        remainder, root = state
        remainder = shift(remainder, 2).at[:, 0].add(pair)
        difference, fits = subtract(remainder, shift(root, 2).at[:, 0].add(1))
        remainder = jnp.where(fits[:, None], difference, remainder)
        return (remainder, shift(root, 1).at[:, 0].add(fits.astype(root.dtype))), None

    zeros = jnp.zeros((bits.shape[0], limbs), jnp.int32)
    top_first = (bits[:, 1::2] * 2 + bits[:, 0::2])[:, ::-1].T  # [pairs, batch]
    (_, root), _ = jax.lax.scan(step, (zeros, zeros), top_first.astype(jnp.int32))
    root_bits = (root[:, :, None] >> jnp.arange(LIMB)) & 1
    return root_bits.reshape(bits.shape[0], -1)[:, :pairs]
