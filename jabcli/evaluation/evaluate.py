"""Held-out evaluation: greedy-decode sources the model never trained on and score the
answers overall and per source length. The Trainer calls it at every evaluation step,
and `jab eval` and `jab compare` call it on saved runs."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import numpy as np

from jabcli.core import memory
from jabcli.core.errors import JabError
from jabcli.core.tokenizer import EOS_ID, PAD_ID, Tokenizer
from jabcli.evaluation import layout
from jabcli.evaluation.decode import decode_bytes, decode_rows
from jabcli.evaluation.figures import Example, Figures, Scores
from jabcli.experiment.experiment import Experiment
from jabcli.tasks import sampling
from jabcli.tasks.batch import Batch


@dataclass(frozen=True)
class HeldOut:
    """Which held-out inputs a model is measured on, and how: `samples` sources with
    lengths uniform in [min_len, max_len] (None: the task's training lengths), or, with
    `each_length`, `samples` at every length in it; with `force_length`, decoded a second
    time at each answer's true length."""

    samples: int
    min_len: int | None = None
    max_len: int | None = None
    each_length: bool = False
    force_length: bool = False


def evaluate(experiment: Experiment, params, key: jax.Array, held_out: HeldOut) -> Scores:
    """Greedy-decode held-out sources (`held_out` says which); accuracies overall and per
    source length.

    With `held_out.force_length` the sources are decoded a second time with each answer's
    true length imposed, and `forced_seq_acc`
    (overall and per length) is the exact match of that content: a model that writes
    the right symbols but stops too early scores there and not in `seq_acc`.
    `forced_symbol_acc` is its per-symbol accuracy: the score of Delétang et al. (2023),
    whose models write exactly as many symbols as the answer has.
    """
    samples, each_length = held_out.samples, held_out.each_length
    min_len, max_len = held_out.min_len, held_out.max_len
    t = experiment.config.task
    min_len = t.min_len if min_len is None else min_len
    max_len = t.max_len if max_len is None else max_len
    rows = samples * (max_len - min_len + 1) if each_length else samples
    check_evaluation_memory(experiment, rows, "--samples", max_len)
    sample_key, positions_key = jax.random.split(key)
    batch = draw_held_out(
        experiment, sample_key, samples, min_len, max_len, each_length=each_length
    )
    src, tgt_out = np.asarray(batch.src), np.asarray(batch.tgt_out)
    if not len(src):
        raise JabError(f"there are no held-out inputs with lengths {min_len}-{max_len}")
    max_out = tgt_out.shape[1]
    answer_lengths = layout.answer_lengths(tgt_out)
    predicted = decode_rows(experiment, params, positions_key, src, max_out)
    if held_out.force_length:
        forced = decode_rows(experiment, params, positions_key, src, max_out, answer_lengths)
    end_scored = experiment.task.end_scored
    result = score(experiment.tokenizer, src, predicted, tgt_out, end_scored=end_scored)
    if held_out.force_length:
        content = score(experiment.tokenizer, src, forced, tgt_out, end_scored=end_scored)
        pairs: list[tuple[Figures, Figures]] = [
            (result, content),
            *((row, content["per_length"][n]) for n, row in result["per_length"].items()),
        ]
        for figures, at_length in pairs:
            figures["forced_seq_acc"] = at_length["seq_acc"]
            figures["forced_symbol_acc"] = at_length["symbol_acc"]
    return result


def draw_held_out(
    experiment: Experiment,
    key,
    samples: int,
    min_len: int,
    max_len: int,
    *,
    each_length: bool = False,
) -> Batch:
    """`sampling.held_out_batch`: for a generated task, one compiled program rather than
    dozens of small ones op by op; a file task chooses its rows on the host."""
    if not experiment.task.generated:
        return sampling.held_out_batch(experiment.task, key, samples, min_len, max_len, each_length)
    return _draw_held_out(experiment, key, samples, min_len, max_len, each_length=each_length)


@partial(jax.jit, static_argnums=(0, 2, 3, 4), static_argnames=("each_length",))
def _draw_held_out(experiment, key, samples, min_len, max_len, *, each_length):
    return sampling.held_out_batch(experiment.task, key, samples, min_len, max_len, each_length)


def check_evaluation_memory(
    experiment: Experiment,
    rows: int,
    option: str,
    max_len: int | None = None,
    longest: str = "--lengths",
) -> None:
    """Refuse an evaluation of `rows` sources whose held-out sample, answers and scored
    examples would not fit in memory (`option` sets `rows`), or whose longest input
    (set by `longest`) cannot be decoded even alone."""
    max_len = experiment.config.task.max_len if max_len is None else max_len
    source = layout.source_width(experiment.task, max_len)
    answer = layout.answer_width(experiment.task, source)
    width = source + 2 * answer
    # Sampling holds a few int32 copies of the batch on the device; scoring keeps each
    # example as text on the host, a few hundred bytes apiece.
    per_row = 4 * 4 * width + 4 * answer + 400 + 8 * width
    memory.check(rows * per_row, f"evaluating {rows} held-out inputs", option)
    # Decoding takes a chunk of rows at a time: the longest inputs at least one row.
    need = decode_bytes(experiment, source, answer)
    memory.check(need, f"decoding an input of {max_len} symbols", f"the longest length ({longest})")


def score(
    tokenizer: Tokenizer,
    src: np.ndarray,
    predicted: np.ndarray,
    expected: np.ndarray,
    *,
    end_scored: bool = False,
) -> Scores:
    """Token and exact-match accuracy of answers [N, T] against references, overall and
    per source length, with every example decoded to text. Index hints are the model's
    working, not its answer: only the symbols count.

    `token_acc` scores every answer token and its <eos>. `symbol_acc` scores them as
    Delétang et al. (2023) do: the answer's symbols, and its end only where their task
    writes an end marker (`end_scored`); a study averages it over lengths, as they do."""
    predicted, expected = symbols_only(tokenizer, predicted), symbols_only(tokenizer, expected)
    width = max(predicted.shape[1], expected.shape[1])
    predicted = np.pad(predicted, ((0, 0), (0, width - predicted.shape[1])))
    expected = np.pad(expected, ((0, 0), (0, width - expected.shape[1])))
    real = expected != PAD_ID
    token_hits = (predicted == expected) & real
    symbols = real if end_scored else real & (expected != EOS_ID)
    symbol_hits = (predicted == expected) & symbols
    exact = np.all(predicted == expected, axis=1)  # both are <pad>-filled after <eos>
    lengths = layout.source_symbols(tokenizer, src)
    per_length: dict[int, Figures] = {}
    for length in np.unique(lengths):
        rows = lengths == length
        per_length[int(length)] = {
            "samples": int(rows.sum()),
            "token_acc": float(token_hits[rows].sum() / real[rows].sum()),
            "symbol_acc": ratio(symbol_hits[rows].sum(), symbols[rows].sum()),
            "seq_acc": float(exact[rows].mean()),
        }
    decode = tokenizer.decode
    examples: list[Example] = [
        {"input": decode(s), "output": decode(p), "expected": decode(e), "correct": bool(ok)}
        for s, p, e, ok in zip(src, predicted, expected, exact)
    ]
    return {
        "samples": len(src),
        "token_acc": float(token_hits.sum() / real.sum()),
        "symbol_acc": ratio(symbol_hits.sum(), symbols.sum()),
        "seq_acc": float(exact.mean()),
        "per_length": per_length,
        "examples": examples,
    }


def ratio(hits, count) -> float:
    """hits / count, and 1.0 for nothing to count (answers with no symbols to score)."""
    return float(hits / count) if count else 1.0


def symbols_only(tokenizer: Tokenizer, ids: np.ndarray) -> np.ndarray:
    """Id rows [N, T] with their index hints taken out, the rest moved up, <pad> after."""
    hints = np.asarray(tokenizer.is_hint(ids))
    if not hints.any():
        return ids
    order = np.argsort(hints, axis=1, kind="stable")  # the other tokens first, in order
    kept = np.take_along_axis(ids, order, axis=1)
    return np.where(np.take_along_axis(hints, order, axis=1), PAD_ID, kept)
