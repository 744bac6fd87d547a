"""Expressions modulo a number (`task.modulus`), as in Delétang et al. 2023: without
brackets (`modular_arithmetic`), with brackets, and equations to solve for x. The answer
is one digit, the class of the input (classification.py); each can show its working
first (`task.scratchpad`).

`evaluate` is the plain-Python reference (operator precedence on two stacks), and
`working`, `bracket_working` and `equation_working` the scratchpads'; the samplers of
expressions with brackets are array code of their own (bracket_arrays.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import add, mul, sub
from typing import TYPE_CHECKING, ClassVar

from jabcli.core.errors import JabError
from jabcli.core.runtime import Lazy
from jabcli.core.tokenizer import PAD_ID
from jabcli.tasks.batch import columns
from jabcli.tasks.bracket_arrays import bracket_expressions, bracket_values
from jabcli.tasks.classification import Classify, Worked, then_class

if TYPE_CHECKING:
    import jax
    import jax.numpy as jnp
else:
    jax, jnp = Lazy("jax"), Lazy("jax.numpy")

DIGITS = "0123456789"

PRECEDENCE = {"+": 1, "-": 1, "*": 2, "negate": 3}
OPERATIONS = {"+": add, "-": sub, "*": mul}


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
        values.append(OPERATIONS[operator](left, right))

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

    def __post_init__(self) -> None:
        if not 2 <= self.modulus <= 10:
            raise JabError(
                f"task.modulus must be 2 to 10 (a digit per residue), got {self.modulus}"
            )
        object.__setattr__(self, "alphabet", DIGITS[: self.modulus] + self.operators)

    @property
    def classes(self) -> str:
        return DIGITS[: self.modulus]

    @property
    def form(self) -> str:
        """What an input looks like, for the error on another one (a subclass may set it
        as a class attribute)."""
        return ""

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

    def draw(self, key, lengths, max_len):
        lengths = lengths - 1 + lengths % 2  # odd: an even length draws one symbol less
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


def bracket_working(text: str, modulus: int) -> list[int] | None:
    """The scratchpad of `ModularArithmeticBrackets`, in plain Python: under each symbol,
    the value so far of the innermost bracket open after it, 0 while it holds none (under
    `(`). Under a digit or `)` that value with the operand it completes taken in (a
    left operand: itself, signed), under an operator or a sign the value before it.
    None when `text` is no expression, or when a * follows a + or - in one bracket: the
    working goes left to right, and 1+2*3 is not (1+2)*3 (the paper brackets every
    operation, `(1+(2*3))`)."""
    if evaluate(text, modulus) is None:
        return None
    frames = [Bracket()]
    sign, shown = False, []
    for symbol in text:
        frame = frames[-1]
        operand = frame.value is None or frame.operator is not None  # an operand comes next
        if symbol == "(":
            frames.append(Bracket(negated=sign))
            sign = False
        elif symbol == "-" and operand:
            sign = not sign
        elif symbol in "+-*":
            if symbol == "*" and frame.additive:
                return None
            frame.operator, frame.additive = symbol, frame.additive or symbol != "*"
        else:  # a digit or ), an operand complete
            if symbol == ")":
                inner = frames.pop()
                assert inner.value is not None  # an expression has no empty brackets
                value, frame = -inner.value if inner.negated else inner.value, frames[-1]
            else:
                value, sign = -int(symbol) if sign else int(symbol), False
            if frame.operator is not None:  # which follows a left operand
                value = OPERATIONS[frame.operator](frame.value, value)
            frame.value, frame.operator = value % modulus, None
        shown.append(frames[-1].value or 0)
    return shown


@dataclass
class Bracket:
    """A bracket open in `bracket_working` (the whole text is the outermost): its value
    so far, the operator waiting for its right operand, whether a + or - was seen in it,
    and whether it is negated."""

    value: int | None = None
    operator: str | None = None
    additive: bool = False
    negated: bool = False


@dataclass(frozen=True)
class ModularArithmeticBrackets(Worked, Modular):
    """With `task.mult`, * joins + and - (the operator of each bracket drawn among the
    three alike), as the paper's experiments ran the task; its code's default, and jab's,
    leaves * out.

    With `task.scratchpad` the working under each symbol is the value so far of the
    innermost bracket open after it (`bracket_working`): a stack's top, where the
    regular tasks' working is one running value. Under a `)` it combines the bracket's
    value (the working before it) with the operator and value written before the
    bracket's `(`, so each step must find its bracket's match: (1-(-2)) -> 01100333
    then 3."""

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
        if self.mult and self.scratchpad:  # its working goes left to right
            return (
                "an expression of digits, + - * and brackets with no * after a + or - in "
                "one bracket, like (1+(2*3))"
            )
        operators = "+ - *" if self.mult else "+ -"
        return f"an expression of digits, {operators} and brackets, like (1-(-2))"

    def value(self, text):
        if self.scratchpad and bracket_working(text, self.modulus) is None:
            return None
        return Modular.solve(self, text)

    def shown(self, text):
        working = bracket_working(text, self.modulus)
        assert working is not None, "a valid text has its working"
        return "".join(str(v) for v in working)

    def draw(self, key, lengths, max_len):
        codes = bracket_expressions(key, lengths, max_len, self.modulus, self.mult)
        values, so_far = bracket_values(codes, self.modulus)
        tokens = jnp.where(codes >= 0, self.symbol_ids[jnp.maximum(codes, 0)], PAD_ID)
        if not self.scratchpad:
            return tokens, self.class_ids[values][:, None], jnp.ones_like(lengths)
        return tokens, self.class_ids[then_class(so_far, values, lengths)], lengths + 1


# How the working of `SolveEquation` writes a value s*x + c modulo m: c alone (s = 0) as
# its digit, x + c as the letter c after a, -x + c as the letter c after k.
AFFINE = "0123456789abcdefghijklmnopqrst"


def equation_working(text: str, modulus: int) -> list[str] | None:
    """The scratchpad of `SolveEquation`, in plain Python: under each symbol of the
    expression, the value so far of the innermost bracket open after it (as
    `bracket_working`) as a function of x, s*x + c written as `AFFINE` writes it; the
    whole left side's again under =; x under the value it must equal. None when the
    working is none (`bracket_working`)."""
    expression, _, value = text.rpartition("=")
    at_0, at_1 = (bracket_working(expression.replace("x", digit), modulus) for digit in "01")
    if at_0 is None or at_1 is None or not value:
        return None
    slopes = [(one - zero) % modulus for zero, one in zip(at_0, at_1)]
    shown = [AFFINE[c + (10 if s == 1 else 20 if s else 0)] for s, c in zip(slopes, at_0)]
    x = (int(value) - at_0[-1]) * (1 if slopes[-1] == 1 else -1) % modulus
    return [*shown, shown[-1], str(x)]


@dataclass(frozen=True)
class SolveEquation(Worked, Modular):
    """An expression of modular_arithmetic_brackets with one digit replaced by x, then =
    and its value; the answer is the digit x stands for (the only one, with + and -
    alone). x replaces a digit drawn uniformly; the paper's draw favours digits after
    a run of other symbols.

    With `task.scratchpad` the working is that of the brackets with x left unknown:
    under each symbol the value so far of the innermost open bracket, s*x + c, a digit
    c where x is not in it, the letter c after a for x + c, after k for -x + c (so
    `e` is x + 4); the left side's again under =, then x under its value:
    (x-(-2))=3 -> 0aa003ccc1 then 1 (x - 3 = x + 2, and x + 2 = 3 at x = 1)."""

    name = "solve_equation"
    level = "DCF"
    description = "Solve for x modulo 5 (task.modulus): (x-(-2))=3 -> 1"
    operators = "+-()x="
    form = "an expression of digits, + - brackets and one x, then = and a digit, like (x-2)=3"
    min_length = 3

    def value(self, text):
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

    def shown(self, text):
        working = equation_working(text, self.modulus)
        assert working is not None, "a valid text has its working"
        return "".join(working)

    def draw(self, key, lengths, max_len):
        key, pick_key = jax.random.split(key)
        codes = bracket_expressions(key, lengths - 2, max_len, self.modulus)
        values = bracket_values(codes, self.modulus)[0]
        m, i = self.modulus, columns(codes)
        digit = (codes >= 0) & (codes < m)
        x_at = jnp.argmax(jnp.where(digit, jax.random.uniform(pick_key, codes.shape), -1.0), axis=1)
        answer = jnp.take_along_axis(codes, x_at[:, None], axis=1)[:, 0]
        x_here = i == x_at[:, None]
        with_x = jnp.where(x_here, m + 4, codes)
        with_x = jnp.where(i == lengths[:, None] - 2, m + 5, with_x)
        with_x = jnp.where(i == lengths[:, None] - 1, values[:, None], with_x)
        tokens = jnp.where(with_x >= 0, self.symbol_ids[jnp.maximum(with_x, 0)], PAD_ID)
        if not self.scratchpad:
            return tokens, self.class_ids[answer][:, None], jnp.ones_like(lengths)
        # The working as s*x + c: c at x = 0, s from x = 1 (past the expression, both
        # stay at the whole left side's value, which is what = shows).
        zero, one = (bracket_values(jnp.where(x_here, d, codes), m)[1] for d in (0, 1))
        slope = (one - zero) % m
        shown = zero + jnp.where(slope == 1, 10, jnp.where(slope == 0, 0, 20))
        shown = jnp.where(i == lengths[:, None] - 1, answer[:, None], shown)  # x under its value
        ids = jnp.asarray(self.tokenizer.ids(AFFINE), jnp.int32)
        return tokens, ids[then_class(shown, answer, lengths)], lengths + 1
