"""The built-in toy tasks: one small class each, one registry.

A task turns a batch of random source sequences into their targets with array
operations (no per-example Python loop), so batches are drawn on the device inside
the jitted train step. `solve` is the plain-Python reference the samplers are tested
against and `jab predict` marks answers with.
"""

from __future__ import annotations

import difflib
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jabcli.errors import JabError
from jabcli.tokenizer import BOS_ID, EOS_ID, PAD_ID


class Batch(NamedTuple):
    """Padded id arrays: `src` [batch, src_len], `tgt_in`/`tgt_out` [batch, tgt_len].

    `src` is the source followed by <eos>.
    `tgt_in` is <bos> + target, `tgt_out` is target + <eos>: the decoder reads one and
    predicts the other.
    """

    src: jax.Array
    tgt_in: jax.Array
    tgt_out: jax.Array


class Task:
    """A sequence-to-sequence task over a fixed alphabet."""

    name: str = ""
    description: str = ""
    alphabet: str = "0123456789"

    def solve(self, text: str) -> str:
        raise NotImplementedError

    def target_length(self, max_len: int) -> int:
        """The longest target for sources of up to `max_len` symbols."""
        return max_len

    def positions_needed(self, max_len: int) -> int:
        """Model positions that sources of up to `max_len` symbols need: the longer of
        source + <eos> and target + <eos>."""
        return max(max_len, self.target_length(max_len)) + 1

    def targets(self, tokens: jax.Array, lengths: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Source ids [batch, max_len] (padded with <pad>) -> target ids and lengths."""
        raise NotImplementedError

    def sample(
        self, key: jax.Array, batch_size: int, min_len: int, max_len: int, symbol_ids: jax.Array
    ) -> Batch:
        """A random batch: lengths uniform in [min_len, max_len], symbols uniform."""
        len_key, sym_key = jax.random.split(key)
        lengths = jax.random.randint(len_key, (batch_size,), min_len, max_len + 1)
        choice = jax.random.randint(sym_key, (batch_size, max_len), 0, symbol_ids.shape[0])
        valid = jnp.arange(max_len)[None, :] < lengths[:, None]
        tokens = jnp.where(valid, symbol_ids[choice], PAD_ID)
        target, target_lengths = self.targets(tokens, lengths)
        tgt_in, tgt_out = decoder_arrays(target, target_lengths, self.target_length(max_len) + 1)
        return Batch(source_array(tokens, lengths), tgt_in, tgt_out)


def source_array(tokens: jax.Array, lengths: jax.Array) -> jax.Array:
    """Padded ids [batch, L] -> [batch, L + 1] with <eos> after each source.

    The end marker gives the encoder a fixed point to count back from, which is what
    reverse (and any task whose output depends on the length) needs.
    """
    padded = jnp.pad(tokens, ((0, 0), (0, 1)), constant_values=PAD_ID)
    at_end = jnp.arange(padded.shape[1])[None, :] == lengths[:, None]
    return jnp.where(at_end, EOS_ID, padded).astype(jnp.int32)


def decoder_arrays(
    target: jax.Array, lengths: jax.Array, tgt_len: int
) -> tuple[jax.Array, jax.Array]:
    """Target ids [batch, T] and lengths -> <bos> + target and target + <eos>, [batch, tgt_len]."""
    batch, width = target.shape
    target = jnp.pad(target, ((0, 0), (0, tgt_len - width)), constant_values=PAD_ID)
    positions = jnp.arange(tgt_len)[None, :]
    tgt_out = jnp.where(positions == lengths[:, None], EOS_ID, target)
    tgt_out = jnp.where(positions <= lengths[:, None], tgt_out, PAD_ID)
    tgt_in = jnp.concatenate([jnp.full((batch, 1), BOS_ID, target.dtype), target[:, :-1]], axis=1)
    tgt_in = jnp.where(positions <= lengths[:, None], tgt_in, PAD_ID)
    return tgt_in.astype(jnp.int32), tgt_out.astype(jnp.int32)


def reverse_padded(tokens: jax.Array, lengths: jax.Array) -> jax.Array:
    """Reverse each row's first `length` ids, keeping the padding at the end."""
    index = lengths[:, None] - 1 - jnp.arange(tokens.shape[1])[None, :]
    flipped = jnp.take_along_axis(tokens, jnp.maximum(index, 0), axis=1)
    return jnp.where(index >= 0, flipped, PAD_ID)


class Copy(Task):
    name = "copy"
    description = "Repeat the input: 3141 -> 3141"

    def solve(self, text: str) -> str:
        return text

    def targets(self, tokens, lengths):
        return tokens, lengths


class Reverse(Task):
    name = "reverse"
    description = "Reverse the input: 3141 -> 1413"

    def solve(self, text: str) -> str:
        return text[::-1]

    def targets(self, tokens, lengths):
        return reverse_padded(tokens, lengths), lengths


class Sort(Task):
    name = "sort"
    description = "Sort the symbols, keeping duplicates: 3141 -> 1134"

    def solve(self, text: str) -> str:
        return "".join(sorted(text))

    def targets(self, tokens, lengths):
        # Ids follow code-point order (see tokenizer), so sorting ids sorts characters.
        padded_last = jnp.where(tokens == PAD_ID, jnp.iinfo(jnp.int32).max, tokens)
        ordered = jnp.sort(padded_last, axis=1, stable=True)
        return jnp.where(ordered == jnp.iinfo(jnp.int32).max, PAD_ID, ordered), lengths


TASKS: dict[str, Task] = {task.name: task for task in (Copy(), Reverse(), Sort())}


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise JabError(
            f"unknown task {name!r}{suggest(name, TASKS)}; valid tasks: {', '.join(TASKS)}"
        )
    return TASKS[name]


def suggest(word: str, choices) -> str:
    """' (did you mean 'x'?)' for a close match, else ''."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
