"""Where things sit in the rows evaluation reads and writes, asked of the task in one
place: a source row is its tokens, then <eos>, then <pad>; an answer row is its tokens,
then <eos>, then <pad>, in as many decoder slots as the task's longest answer to that
source takes (jabcli/tasks/derived.py). Held-out scoring, decoding and the inspecting
commands (predict, show-attention) build and read rows through these functions alone."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jabcli.core.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer
from jabcli.tasks import derived


def source_rows(rows: list[list[int]]) -> np.ndarray:
    """Source ids, one list per input, as a batch [B, S]: each row ends with <eos> (as in
    training) and is padded to the longest."""
    batch = np.full((len(rows), max(map(len, rows)) + 1), PAD_ID, np.int32)
    for i, row in enumerate(rows):
        batch[i, : len(row) + 1] = [*row, EOS_ID]
    return batch


def source_width(task, max_len: int) -> int:
    """The tokens of a source row of `max_len` symbols, its <eos> included."""
    return derived.widths(task, max_len)[0]


def answer_width(task, src_width: int) -> int:
    """Decoder slots for a batch of source rows `src_width` tokens wide."""
    return derived.answer_width_for(task, src_width)


def answer_limits(task, src: jnp.ndarray) -> jnp.ndarray:
    """[B] each source row's own decoder slots: no answer is longer than the task allows
    for its source."""
    return derived.answer_slots(task, src)


def empty_rows(src: jnp.ndarray) -> jnp.ndarray:
    """[B] True where a source row holds no symbol: filler rows that need no answer."""
    return ~jnp.any((src != PAD_ID) & (src != EOS_ID), axis=1)


def answer_lengths(answers: np.ndarray) -> np.ndarray:
    """[B] the tokens of each answer row before its <eos> (the index of that <eos>)."""
    return np.sum(answers != PAD_ID, axis=1) - 1


def source_symbols(tokenizer: Tokenizer, src: np.ndarray) -> np.ndarray:
    """[B] the symbols of each source row: its tokens but <eos>, <pad> and index hints."""
    return np.sum((src != PAD_ID) & (src != EOS_ID) & ~tokenizer.is_hint(src), axis=1)


def produced(answer: np.ndarray) -> np.ndarray:
    """One answer row [T] up to and with its first <eos> (all of it without one)."""
    ends = np.flatnonzero(answer == EOS_ID)
    return answer[: ends[0] + 1] if ends.size else answer


def decoder_input(produced: np.ndarray) -> np.ndarray:
    """The decoder's input [1, T] that wrote `produced` [T]: <bos>, then the answer
    shifted right by one."""
    return np.concatenate([[BOS_ID], produced[:-1]]).astype(np.int32)[None]
