"""Tasks on numbers: decimal addition, the binary arithmetic of Delétang et al. 2023
("Neural Networks and the Chomsky Hierarchy": addition, multiplication and square root
of binary numbers) and its expressions modulo a number (`task.modulus`): without
brackets, with brackets, and equations to solve for x.

As every task's, the samplers are array code, drawn inside the jitted train step:
numbers are rows of digits, carries and stacks are `lax.scan`s along the row.
`solve` is plain Python (integers, a recursive parser) to test them against.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from jabcli.core.errors import JabError
from jabcli.core.runtime import Lazy
from jabcli.core.tokenizer import PAD_ID
from jabcli.tasks.tasks import (
    UNALIGNED,
    Classify,
    Task,
    Worked,
    assemble,
    columns,
    gather,
    source_lengths,
)

jax, jnp = Lazy("jax"), Lazy("jax.numpy")

DIGITS = "0123456789"


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

    def sample_lengths(self, key, lengths, max_len):
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
        answer = gather(digit_ids[sum_low], order, sum_len)[:, : self.output_length(max_len)]
        return assemble(tokens, lengths, answer, sum_len, self.answer_width(max_len))

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

    def sample_lengths(self, key, lengths, max_len):
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
        answer = jnp.where(i < answer_len[:, None], bit_ids[answer], PAD_ID)
        answer = answer[:, : self.output_length(max_len)]
        return assemble(tokens, lengths, answer, answer_len, self.answer_width(max_len))


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

    def sample_lengths(self, key, lengths, max_len):
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
        return assemble(tokens, lengths, answer, out_len, self.answer_width(max_len))


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


# Expressions modulo a number: digits 0 .. modulus - 1, operators and brackets.


PRECEDENCE = {"+": 1, "-": 1, "*": 2, "negate": 3}


def evaluate(text: str, modulus: int) -> int | None:
    """The value modulo `modulus` of an expression of digits, + - * (with the usual
    precedence), brackets and unary minus; None when it is not one. Operator
    precedence parsing with two stacks, so nesting is as deep as the input likes."""
    values: list[int] = []
    operators: list[str] = []

    def apply() -> None:
        operator = operators.pop()
        if operator == "negate":
            values.append(-values.pop())
            return
        right, left = values.pop(), values.pop()
        values.append({"+": left + right, "-": left - right, "*": left * right}[operator])

    operand = True  # whether an operand comes next (so - is a sign)
    for symbol in text:
        if operand and symbol in DIGITS[:modulus]:
            values.append(int(symbol))
            operand = False
        elif operand and symbol in "-(":
            operators.append("negate" if symbol == "-" else "(")
        elif not operand and symbol in "+-*":
            while (
                operators
                and operators[-1] != "("
                and (PRECEDENCE[operators[-1]] >= PRECEDENCE[symbol])
            ):
                apply()
            operators.append(symbol)
            operand = True
        elif not operand and symbol == ")":
            while operators and operators[-1] != "(":
                apply()
            if not operators:
                return None
            operators.pop()
        else:
            return None
    if operand:  # empty, or ending in an operator
        return None
    while operators and operators[-1] != "(":
        apply()
    return None if operators else values[0] % modulus


@dataclass(frozen=True)
class Modular(Classify):
    """A task on expressions modulo `task.modulus` (2-10, one digit each): its alphabet is
    the digits below the modulus and the task's `operators`; its classes, the digits."""

    modulus: int = 5
    operators: ClassVar[str] = ""
    form: ClassVar[str] = ""  # what an input looks like, for the error on another one

    def __post_init__(self) -> None:
        if not 2 <= self.modulus <= 10:
            raise JabError(
                f"task.modulus must be 2 to 10 (a digit per residue), got {self.modulus}"
            )
        object.__setattr__(self, "alphabet", DIGITS[: self.modulus] + self.operators)

    @property
    def classes(self) -> str:
        return DIGITS[: self.modulus]

    def check_input(self, text):
        if self.solve(text) is None:
            raise JabError(f"{self.name} takes {self.form}; got {text!r}")

    def solve(self, text):
        value = evaluate(text, self.modulus) if set(text) <= set(self.alphabet) else None
        return None if value is None else str(value)


@dataclass(frozen=True)
class ModularArithmetic(Worked, Modular):
    """Digits and the operators + - * in turn (so lengths are odd: an even length draws
    one symbol less, as in the paper), evaluated with the usual precedence.

    With `task.scratchpad` the working under each digit is the product being multiplied
    (the term), under each operator the sum of the terms before it; each follows from the
    two before it and the symbol above it: 1+2*3 -> 11211 then 2, written 112112."""

    name = "modular_arithmetic"
    description = "Evaluate modulo 5 (task.modulus), * before + and -: 1+2*3 -> 2"
    operators = "+-*"
    form = "digits and + - * in turn, like 1+2*3"

    def value(self, text):
        digits, operators = text[0::2], text[1::2]
        in_turn = set(digits) <= set(self.classes) and set(operators) <= set(self.operators)
        return Modular.solve(self, text) if text and in_turn else None

    def shown(self, text):
        return "".join(str(v) for v in working(text, self.modulus))

    def sample_lengths(self, key, lengths, max_len):
        return super().sample_lengths(key, lengths - 1 + lengths % 2, max_len)

    def sample_symbols(self, key, lengths, max_len):
        digit_key, operator_key = jax.random.split(key)
        shape = (lengths.shape[0], max_len)
        digits = jax.random.randint(digit_key, shape, 0, self.modulus)
        operators = jax.random.randint(operator_key, shape, self.modulus, self.modulus + 3)
        i = columns(digits)
        values = jnp.where(i % 2 == 0, digits, operators)
        tokens = jnp.where(i < lengths[:, None], self.symbol_ids[values], PAD_ID)
        return (tokens, *self.targets(tokens, lengths))

    def working(self, values, valid):
        totals, terms = self.evaluate(values, valid)  # [batch, numbers] each
        i, last = jnp.arange(values.shape[1]), terms.shape[1] - 1
        return jnp.where(
            i % 2 == 0,
            terms[:, jnp.minimum(i // 2, last)],
            totals[:, jnp.minimum((i + 1) // 2, last)],
        )

    def classify(self, values, valid):
        totals, terms = self.evaluate(values, valid)
        return (totals[:, -1] + terms[:, -1]) % self.modulus

    def evaluate(self, values: jax.Array, valid: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Rows of symbol values [batch, L] -> the sum of the terms before each number and
        the term each number ends (the product being multiplied), [batch, ceil(L / 2)]
        each; past a row's end both stay as they were."""
        m = self.modulus
        numbers, operators = values[:, 0::2], values[:, 1::2] - m  # 0 +, 1 -, 2 *
        present = valid[:, 0::2]

        def apply(state, column):
            total, term = state  # the sum so far, and the product being multiplied
            operator, number, here = column
            product = jnp.where(operator == 2, term * number, total + term) % m
            signed = jnp.where(operator == 1, -number, number) % m
            total = jnp.where(here & (operator != 2), product, total)
            term = jnp.where(here, jnp.where(operator == 2, product, signed), term)
            return (total, term), (total, term)

        rest = numbers.shape[1] - 1
        start = (jnp.zeros_like(numbers[:, 0]), numbers[:, 0])
        columns_ = (operators[:, :rest].T, numbers[:, 1:].T, present[:, 1:].T)
        _, (totals, terms) = jax.lax.scan(apply, start, columns_)
        totals = jnp.concatenate([start[0][:, None], totals.T], axis=1)
        terms = jnp.concatenate([start[1][:, None], terms.T], axis=1)
        return totals, terms


def working(text: str, modulus: int) -> list[int]:
    """The scratchpad of `ModularArithmetic` for a valid expression, in plain Python: the
    term under each digit, the sum of the terms before it under each operator."""
    total, term = 0, int(text[0]) % modulus
    shown = [term]
    for operator, digit in zip(text[1::2], text[2::2]):
        if operator != "*":
            total = (total + term) % modulus
        shown.append(total)
        d = int(digit)
        term = {"*": term * d, "+": d, "-": -d}[operator] % modulus
        shown.append(term)
    return shown


# Codes of what the expression generator keeps on its stack besides lengths (>= 1).
CLOSE, OPERATOR, DIGIT, MINUS = -1, -2, -3, -4
# What lengths 2 (-d), 3 ((d)) and 4 ((-d)) leave to write once they wrote their first
# symbol, pushed first to last, so last out: [stack code] per length 0-4.
FIXED_PUSHES = [[0] * 4, [0] * 4, [DIGIT, 0, 0, 0], [CLOSE, DIGIT, 0, 0], [CLOSE, DIGIT, MINUS, 0]]


def bracket_expressions(
    key: jax.Array, lengths: jax.Array, width: int, modulus: int, mult: bool = False
) -> tuple[jax.Array, jax.Array]:
    """Expressions with brackets of `lengths` symbols as the paper draws them, and their
    values: symbol codes [batch, width] (digits 0 .. m - 1, then m +, m + 1 -, m + 2 (,
    m + 3 ), m + 4 *, -1 past the end) and values [batch].

    The paper writes an expression of length n as d, -d, (d), (-d) for n = 1-4, and as
    (left+right) or (left-right) with a random split of the rest for n >= 5; with `mult`,
    also (left*right), the three operators drawn alike. One symbol per step, a stack
    holds what is still to write (lengths, and literals); a second stack of frames
    evaluates the symbols as they come out."""
    batch = lengths.shape[0]
    rows = jnp.arange(batch)
    m = modulus
    depth = width // 2 + 2
    split_key, operator_key, digit_key = jax.random.split(key, 3)
    splits = jax.random.uniform(split_key, (width, batch))
    if mult:
        choice = jax.random.randint(operator_key, (width, batch), 0, 3)
        operators = jnp.asarray([m, m + 1, m + 4])[choice]
    else:
        operators = jax.random.randint(operator_key, (width, batch), m, m + 2)
    digits = jax.random.randint(digit_key, (width, batch), 0, m)

    def put(array, at, value, where):
        return array.at[rows, at].set(jnp.where(where, value, array[rows, at]))

    def step(state, drawn):
        todo, height, left, has, pending, level, negate = state
        split, operator, digit = drawn
        live = height > 0
        top = jnp.where(live, todo[rows, jnp.maximum(height - 1, 0)], 0)
        height = jnp.maximum(height - 1, 0)
        # What to write now, and what to write after it (pushed last-first).
        left_len = 1 + jnp.floor(split * jnp.maximum(top - 4, 1)).astype(jnp.int32)
        code = jnp.select(
            [
                top == CLOSE,
                top == OPERATOR,
                (top == DIGIT) | (top == 1),
                (top == MINUS) | (top == 2),
            ],
            [m + 3, operator, digit, m + 1],
            m + 2,
        )
        small = jnp.clip(top, 0, 4)  # literals and lengths 1-4 push a fixed list
        split = jnp.stack(
            [jnp.full(batch, CLOSE), top - 3 - left_len, jnp.full(batch, OPERATOR), left_len],
            axis=1,
        )
        after = jnp.where((top >= 5)[:, None], split, jnp.asarray(FIXED_PUSHES)[small])
        pushed = jnp.where(top >= 5, 4, jnp.asarray([0, 0, 1, 2, 3])[small])
        for k in range(4):
            todo = todo.at[rows, jnp.minimum(height + k, todo.shape[1] - 1)].set(after[:, k])
        height = height + pushed
        code = jnp.where(live, code, -1)
        # Evaluate it: frames hold a left operand, whether it is there, and an operator.
        here = pending[rows, level]
        opens, closes = live & (code == m + 2), live & (code == m + 3)
        subtracts = (code == m + 1) & has[rows, level] & (here < 0)  # else a sign
        binary = live & ((code == m) | subtracts | (code == m + 4))
        negate = negate | (live & (code == m + 1) & ~binary)
        has = put(has, level + 1, False, opens)
        pending = put(pending, level + 1, -1, opens)
        pending = put(pending, level, code, binary)
        operand = jnp.where(negate, -code, code) % m
        gives = live & ((code < m) & (code >= 0) | closes)
        value = jnp.where(closes, left[rows, level], operand)
        into = jnp.where(closes, level - 1, level)
        before, held, how = left[rows, into], has[rows, into], pending[rows, into]
        results = [before + value, before - value, before * value]
        combined = jnp.select([how == m, how == m + 1, how == m + 4], results) % m
        left = put(left, into, jnp.where(held, combined, value), gives)
        has = put(has, into, True, gives)
        pending = put(pending, into, -1, gives)
        negate = negate & ~(live & (code >= 0) & (code < m))
        level = level + opens - closes
        return (todo, height, left, has, pending, level, negate), code

    todo = jnp.zeros((batch, width + 4), jnp.int32).at[:, 0].set(lengths)
    frames = jnp.zeros((batch, depth), jnp.int32)
    state = (
        todo, (lengths > 0).astype(jnp.int32), frames, frames.astype(bool), frames - 1,
        jnp.zeros(batch, jnp.int32), jnp.zeros(batch, bool),
    )  # fmt: skip
    (_, _, left, _, _, _, _), codes = jax.lax.scan(step, state, (splits, operators, digits))
    return codes.T, left[:, 0]


@dataclass(frozen=True)
class ModularArithmeticBrackets(Modular):
    """With `task.mult`, * joins + and - (the operator of each bracket drawn among the
    three alike), as the paper's experiments ran the task; its code's default, and jab's,
    leaves * out."""

    mult: bool = False
    name = "modular_arithmetic_brackets"
    level = "DCF"
    description = "Evaluate modulo 5 (task.modulus), with brackets: (1-(-2)) -> 3"
    operators = "+-()"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mult:  # last, so that the generator's codes m + 4 are *
            object.__setattr__(self, "alphabet", self.alphabet + "*")

    @property
    def form(self) -> str:
        operators = "+ - *" if self.mult else "+ -"
        return f"an expression of digits, {operators} and brackets, like (1-(-2))"

    def sample_symbols(self, key, lengths, max_len):
        codes, values = bracket_expressions(key, lengths, max_len, self.modulus, self.mult)
        tokens = jnp.where(codes >= 0, self.symbol_ids[jnp.maximum(codes, 0)], PAD_ID)
        return tokens, self.class_ids[values][:, None], jnp.ones_like(lengths)


@dataclass(frozen=True)
class SolveEquation(Modular):
    """An expression of modular_arithmetic_brackets with one digit replaced by x, then =
    and its value; the answer is the digit x stands for (the only one, with + and -
    alone). x replaces a digit drawn uniformly; the paper's draw favours digits after
    a run of other symbols."""

    name = "solve_equation"
    level = "DCF"
    description = "Solve for x modulo 5 (task.modulus): (x-(-2))=3 -> 1"
    operators = "+-()x="
    form = "an expression of digits, + - brackets and one x, then = and a digit, like (x-2)=3"
    min_length = 3

    def solve(self, text):
        expression, equals, value = text.rpartition("=")
        well_formed = set(text) <= set(self.alphabet) and expression.count("x") == 1
        if not (equals and well_formed and len(value) == 1 and value in self.classes):
            return None
        found = [
            digit
            for digit in self.classes
            if evaluate(expression.replace("x", digit), self.modulus) == int(value)
        ]
        return found[0] if len(found) == 1 else None

    def sample_symbols(self, key, lengths, max_len):
        key, pick_key = jax.random.split(key)
        codes, values = bracket_expressions(key, lengths - 2, max_len, self.modulus)
        m, i = self.modulus, columns(codes)
        digit = (codes >= 0) & (codes < m)
        x_at = jnp.argmax(jnp.where(digit, jax.random.uniform(pick_key, codes.shape), -1.0), axis=1)
        answer = jnp.take_along_axis(codes, x_at[:, None], axis=1)[:, 0]
        codes = jnp.where(i == x_at[:, None], m + 4, codes)
        codes = jnp.where(i == lengths[:, None] - 2, m + 5, codes)
        codes = jnp.where(i == lengths[:, None] - 1, values[:, None], codes)
        tokens = jnp.where(codes >= 0, self.symbol_ids[jnp.maximum(codes, 0)], PAD_ID)
        return tokens, self.class_ids[answer][:, None], jnp.ones_like(lengths)
