"""Expressions with brackets modulo a number, as array code on the device (for
`modular_arithmetic_brackets`, modular.py): `bracket_expressions` writes an expression a
symbol a step from a stack of what is left to write, as the paper draws them, and
`bracket_values` evaluates it on a stack of brackets, with the value so far under each
symbol (its working). The plain-Python references are modular.py's `evaluate` and
`bracket_working`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jabcli.core.runtime import Lazy

if TYPE_CHECKING:
    import jax
    import jax.numpy as jnp
else:
    jax, jnp = Lazy("jax"), Lazy("jax.numpy")


# Codes of what the expression generator keeps on its stack besides lengths (>= 1).
CLOSE, OPERATOR, DIGIT, MINUS = -1, -2, -3, -4
# What lengths 2 (-d), 3 ((d)) and 4 ((-d)) leave to write once they wrote their first
# symbol, pushed first to last, so last out: [stack code] per length 0-4.
FIXED_PUSHES = [[0] * 4, [0] * 4, [DIGIT, 0, 0, 0], [CLOSE, DIGIT, 0, 0], [CLOSE, DIGIT, MINUS, 0]]


def bracket_expressions(
    key: jax.Array, lengths: jax.Array, width: int, modulus: int, mult: bool = False
) -> jax.Array:
    """Expressions with brackets of `lengths` symbols as the paper draws them, as symbol
    codes [batch, width]: digits 0 .. m - 1, then m +, m + 1 -, m + 2 (, m + 3 ),
    m + 4 *, -1 past the end (`bracket_values` evaluates them).

    The paper writes an expression of length n as d, -d, (d), (-d) for n = 1-4, and as
    (left+right) or (left-right) with a random split of the rest for n >= 5; with `mult`,
    also (left*right), the three operators drawn alike. One symbol per step, a stack
    holds what is still to write (lengths, and literals)."""
    batch = lengths.shape[0]
    rows = jnp.arange(batch)
    m = modulus
    split_key, operator_key, digit_key = jax.random.split(key, 3)
    splits = jax.random.uniform(split_key, (width, batch))
    if mult:
        choice = jax.random.randint(operator_key, (width, batch), 0, 3)
        operators = jnp.asarray([m, m + 1, m + 4])[choice]
    else:
        operators = jax.random.randint(operator_key, (width, batch), m, m + 2)
    digits = jax.random.randint(digit_key, (width, batch), 0, m)

    def step(state, drawn):
        todo, height = state
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
        return (todo, height), jnp.where(live, code, -1)

    todo = jnp.zeros((batch, width + 4), jnp.int32).at[:, 0].set(lengths)
    state = (todo, (lengths > 0).astype(jnp.int32))
    _, codes = jax.lax.scan(step, state, (splits, operators, digits))
    return codes.T


def bracket_values(codes: jax.Array, modulus: int) -> tuple[jax.Array, jax.Array]:
    """Expressions as symbol codes [batch, width] (those of `bracket_expressions`, a
    sign only before a digit) -> their values [batch] and, under each symbol, the value
    so far of the innermost bracket open after it [batch, width] (see
    `bracket_working`). A stack of frames, each a left operand, whether it is there yet,
    and the operator waiting for its right one."""
    batch, width = codes.shape
    rows = jnp.arange(batch)
    m = modulus

    def put(array, at, value, where):
        return array.at[rows, at].set(jnp.where(where, value, array[rows, at]))

    def step(state, code):
        left, has, pending, level, negate = state
        live = code >= 0
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
        so_far = jnp.where(has[rows, level], left[rows, level], 0)
        return (left, has, pending, level, negate), so_far

    frames = jnp.zeros((batch, width // 2 + 2), jnp.int32)
    state = (frames, frames.astype(bool), frames - 1, jnp.zeros(batch, jnp.int32),
             jnp.zeros(batch, bool))  # fmt: skip
    (left, _, _, _, _), so_far = jax.lax.scan(step, state, codes.T)
    return left[:, 0], so_far.T
