"""Batched greedy decoding, jitted, stopping once every sequence has produced <eos>.

`greedy_decode` feeds one token at a time through the decoder with a key/value cache
(the encoder's keys and values are computed once per sequence); `greedy_decode_full`
reruns the whole decoder at every step and is kept as the reference it is tested
and benchmarked against. Both read the positions [B, S] and [B, max_out] the model's
scheme drew (`Experiment.positions`). A row whose source holds no symbol (padding
added to fill a batch) counts as finished from the start and gets no answer.

Given `lengths` [B], the answers' true lengths, decoding is forced to that length:
<eos> is never chosen before it and always written at it (`jab eval --force-length`),
so what is scored is the content alone. A row whose length is FREE is not forced:
`answered` decodes free rows so, and free and forced decoding share one program. Given
`limits` [B], a row stops after that many tokens: no answer is longer than the task
allows for its source (`answer`).

The encoder form (model.arch=encoder, encoder_only.py) and the recurrent forms
(recurrent.py) feed nothing back: their answer is one pass, every slot's token chosen
at once by the same rule (`one_pass_decode`).

`decode_rows` decodes any number of sources in bounded memory: sorted by length and cut
into chunks of similar length, each as wide as its longest source (rounded up to one of
a few widths, so compiled programs are reused) and decoded until its own longest answer
ends. Row r reads positions drawn from its own key, `fold_in(key, r)`, so its answer
does not depend on which rows it was chunked with (it does on r, for randomized
positions: the same input at another row may draw other positions).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextvars import ContextVar
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jabcli.core import devices, program_store
from jabcli.core.tokenizer import BOS_ID, EOS_ID, PAD_ID
from jabcli.evaluation import layout
from jabcli.model.contract import ModelFns


def _finish(tokens: jax.Array) -> jax.Array:
    """Pad everything after each row's first <eos>."""
    after_eos = jnp.cumsum(tokens == EOS_ID, axis=1) - (tokens == EOS_ID) > 0
    return jnp.where(after_eos, PAD_ID, tokens)


FREE = -1  # a row's entry in `lengths` that forces nothing: it ends where it chooses


def free(src) -> np.ndarray:
    """`lengths` [B] that force no row: decoded so, the answers are those of no `lengths`,
    from the program that forced decoding runs too."""
    return np.full(src.shape[:1], FREE, np.int32)


def _choose(logits: jax.Array, position, empty: jax.Array, lengths: jax.Array | None):
    """[B, V] logits at target index `position` -> the greedy tokens [B]: never <pad> or
    <bos>, which no answer holds (fed back, a decoder-only model's full pass would mask a
    <pad> that its cache keeps); a row with a length (not FREE) in `lengths`: <eos> at it
    and nowhere else."""
    logits = logits.at[:, jnp.array([PAD_ID, BOS_ID])].set(-jnp.inf)
    if lengths is not None:
        logits = logits.at[:, EOS_ID].set(jnp.where(lengths == FREE, logits[:, EOS_ID], -jnp.inf))
    token = jnp.argmax(logits, axis=-1)
    if lengths is not None:
        token = jnp.where(position == lengths, EOS_ID, token)
    return jnp.where(empty, PAD_ID, token).astype(jnp.int32)


def _not_done(position, out: jax.Array, empty: jax.Array, max_out: int, limits) -> jax.Array:
    done = empty | jnp.any(out == EOS_ID, axis=1)
    if limits is not None:
        done = done | (position >= limits)
    return (position < max_out) & ~jnp.all(done)


def _cut(out: jax.Array, limits: jax.Array | None) -> jax.Array:
    """Pad each row from its limit on, and after its first <eos>."""
    if limits is not None:
        out = jnp.where(jnp.arange(out.shape[1]) < limits[:, None], out, PAD_ID)
    return _finish(out)


def row_keys(key: jax.Array, rows) -> jax.Array:
    """[B] keys, one per row number in `rows`: what each row's positions are drawn from."""
    return _row_keys(key, np.asarray(rows, np.uint32))


@jax.jit
def _row_keys(key: jax.Array, rows: jax.Array) -> jax.Array:  # one program, not several
    return jax.vmap(lambda row: jax.random.fold_in(key, row))(rows)


@partial(jax.jit, static_argnames=("experiment", "max_out"))
def answer(experiment, params, keys: jax.Array, src: jax.Array, max_out: int, lengths=None):
    """What the model answers to sources [B, S] (see `greedy_decode`), each row reading
    the positions `experiment.positions` gives it (randomized ones drawn from its own key
    in `keys`, see `row_keys`) and stopping where the task's longest answer to its source
    would end; and those positions. One compiled program, which the persistent cache
    keeps."""

    def one(key, row):
        src_positions, tgt_positions = experiment.positions(key, row[None], max_out)
        return src_positions[0], tgt_positions[0]

    positions = jax.vmap(one)(keys, src)
    task = experiment.task
    limits = layout.answer_limits(task, src)
    decode = one_pass_decode if experiment.one_pass else greedy_decode
    decoded = decode(experiment.model, params, src, max_out, *positions, lengths, limits)
    return decoded, positions


_programs: dict = {}  # (experiment, shapes) -> `answer` compiled for them
_compiling: dict = {}  # (experiment, shapes) -> the lock of the thread compiling it
_lock = threading.Lock()


def answered(experiment, params, keys, src, max_out: int, lengths=None):
    """`answer`, run by its program for these shapes: compiled once per process, and kept
    on disk for the next one (`program_store.stored_program`), so that a warm `jab predict`
    neither traces nor lowers it. Chunks of one shape decoded side by side compile it
    once, and so do free and forced decoding (no `lengths` is `free` lengths)."""
    lengths = free(src) if lengths is None else np.asarray(lengths, np.int32)
    shapes = (src.shape, keys.shape, max_out, lengths.shape)
    found = (experiment, shapes, jax.device_count())
    with _lock:
        compiling = _compiling.setdefault(found, threading.Lock())
    with compiling:
        if found not in _programs:
            lower = partial(answer.lower, experiment, params, keys, src, max_out, lengths)
            name = f"answer {shapes}"  # (stored_program adds the devices)
            _programs[found] = program_store.stored_program(experiment, name, lower)
    return _programs[found](params, keys, src, lengths)


@partial(jax.jit, static_argnames=("experiment",))
def attention_weights(experiment, params, src, tgt_in, src_positions, tgt_positions):
    """Every layer's attention weights as the model reads sources [B, S] and answers so
    far [B, T] (teacher-forced, in one pass) at the positions decoding read; compiled once
    per experiment and shape, as `answer` is."""
    _, weights = experiment.model.forward(
        params, None, src, tgt_in, src_positions=src_positions, tgt_positions=tgt_positions
    )
    return weights


@partial(jax.jit, static_argnames=("fns", "max_out"))
def greedy_decode(
    fns: ModelFns,
    params,
    src: jax.Array,
    max_out: int,
    src_positions: jax.Array,
    tgt_positions: jax.Array,
    lengths: jax.Array | None = None,
    limits: jax.Array | None = None,
) -> jax.Array:
    """src [B, S] -> output ids [B, max_out], <eos>-terminated and <pad>-filled."""
    batch, empty = src.shape[0], layout.empty_rows(src)
    decode_step = fns.decode_step
    assert fns.encode and fns.init_cache and decode_step, "a token-by-token form builds these"
    memory = fns.encode(params, None, src, src_positions)
    cache = fns.init_cache(params, None, memory, src_positions, max_out)
    out = jnp.full((batch, max_out), PAD_ID, jnp.int32)

    def step(carry):
        position, token, out, cache = carry
        logits, cache = decode_step(
            params, None, token, position, cache, src, tgt_positions, src_positions
        )
        token = _choose(logits, position, empty, lengths)
        out = jax.lax.dynamic_update_slice_in_dim(out, token[:, None], position, axis=1)
        return position + 1, token, out, cache

    start = (0, jnp.full((batch,), BOS_ID, jnp.int32), out, cache)
    _, _, out, _ = jax.lax.while_loop(
        lambda carry: _not_done(carry[0], carry[2], empty, max_out, limits), step, start
    )
    return _cut(out, limits)


@partial(jax.jit, static_argnames=("fns", "max_out"))
def greedy_decode_full(
    fns: ModelFns,
    params,
    src: jax.Array,
    max_out: int,
    src_positions: jax.Array,
    tgt_positions: jax.Array,
    lengths: jax.Array | None = None,
    limits: jax.Array | None = None,
) -> jax.Array:
    """Same answer as `greedy_decode`, recomputing the decoder over the whole prefix."""
    batch, empty = src.shape[0], layout.empty_rows(src)
    tgt_in = jnp.full((batch, max_out), PAD_ID, jnp.int32).at[:, 0].set(BOS_ID)
    out = jnp.full((batch, max_out), PAD_ID, jnp.int32)

    def step(carry):
        position, tgt_in, out = carry
        logits, _ = fns.forward(
            params, None, src, tgt_in, src_positions=src_positions, tgt_positions=tgt_positions
        )
        token = _choose(logits[:, position], position, empty, lengths)
        out = out.at[:, position].set(token)
        tgt_in = jax.lax.dynamic_update_slice_in_dim(
            tgt_in, token[:, None], jnp.minimum(position + 1, max_out - 1), axis=1
        )
        return position + 1, tgt_in, out

    _, _, out = jax.lax.while_loop(
        lambda carry: _not_done(carry[0], carry[2], empty, max_out, limits),
        step,
        (0, tgt_in, out),
    )
    return _cut(out, limits)


@partial(jax.jit, static_argnames=("fns", "max_out"))
def one_pass_decode(
    fns: ModelFns,
    params,
    src: jax.Array,
    max_out: int,
    src_positions: jax.Array,
    tgt_positions: jax.Array,
    lengths: jax.Array | None = None,
    limits: jax.Array | None = None,
) -> jax.Array:
    """The encoder form's answer: every slot's token from one pass, each chosen as
    `greedy_decode` chooses a step's (with `lengths`, <eos> nowhere before a row's length
    and at it); src [B, S] -> [B, max_out], cut at the first <eos>."""
    empty = layout.empty_rows(src)
    slots = jnp.zeros((src.shape[0], max_out), jnp.int32)  # only their width is read
    logits, _ = fns.forward(
        params, None, src, slots, src_positions=src_positions, tgt_positions=tgt_positions
    )
    choose = jax.vmap(
        lambda step_logits, step: _choose(step_logits, step, empty, lengths),
        in_axes=(1, 0),
        out_axes=1,
    )
    return _cut(choose(logits, jnp.arange(max_out)), limits)


WIDTHS = (8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048)
BUDGET = 256 * 2**20  # bytes of decoding memory a chunk may take (`decode_bytes`)
MAX_ROWS = 1024


def width_for(tokens: int, widest: int) -> int:
    """The compiled width for sources of up to `tokens` tokens: the next of a few widths,
    each half again the one before, so that chunks share programs; at most `widest`."""
    return min(next((w for w in WIDTHS if w >= tokens), widest), widest)


def decode_bytes(experiment, src_width: int, max_out: int) -> int:
    """About what decoding one source row `src_width` wide to `max_out` tokens holds at
    its peak, as the model form counts it (`Form.decode_bytes`)."""
    return experiment.form.decode_bytes(experiment.config.model, src_width, max_out)


def rows_for(experiment, src_width: int, max_out: int, budget: int = BUDGET) -> int:
    """Rows a chunk of this shape holds within `budget`: a power of two, at least 1."""
    fit = max(1, min(MAX_ROWS, budget // max(1, decode_bytes(experiment, src_width, max_out))))
    return 1 << (fit.bit_length() - 1)


def plan(experiment, src: np.ndarray, max_out: int, budget: int = BUDGET, threads: int = 1):
    """The chunks `decode_rows` decodes `src` [N, S] in: (row indices, source width,
    answer width, rows) each. All of `src` at once (in a power of two of rows) when it
    fits in `budget` x `threads`;
    else shortest sources first, the inputs of one width in chunks of one size (a power
    of two; the last one padded), small enough for `budget` and for `threads` chunks at
    least when there are that many inputs."""
    row_bytes = decode_bytes(experiment, src.shape[1], max_out)
    if len(src) * row_bytes <= budget * threads:
        # Small enough for one program: one chunk compiles once and decodes at once. Its
        # rows are a power of two where that fits too (the extra rows are finished from
        # the start), so that evaluations and predictions of other sizes share it.
        size = 1 << max(0, len(src) - 1).bit_length()
        size = size if size * row_bytes <= budget * threads else len(src)
        return [(np.arange(len(src)), src.shape[1], max_out, size)]
    tokens = np.sum(src != PAD_ID, axis=1)
    order = np.argsort(tokens, kind="stable")
    task = experiment.task
    chunks, start = [], 0
    while start < len(order):
        width = width_for(int(tokens[order[start]]), src.shape[1])
        out_width = min(max_out, layout.answer_width(task, width))
        stop = start + int(np.sum(tokens[order[start:]] <= width))  # this width's inputs
        share = -(-(stop - start) // threads)
        rows = min(rows_for(experiment, width, out_width, budget), 1 << (share - 1).bit_length())
        for first in range(start, stop, rows):
            taken = min(rows, stop - first)
            size = rows if stop - start > rows else 1 << (taken - 1).bit_length()
            chunks.append((order[first : first + taken], width, out_width, size))
        start = stop
    return chunks


_reporting: ContextVar[Callable[[int, int], None] | None] = ContextVar("reporting", default=None)


@contextlib.contextmanager
def reporting(progress: Callable[[int, int], None]):
    """Within it, each `decode_rows` reports to `progress(done, total)`: (0, total) as it
    starts, then as its chunks end (a command's progress bar, without passing it down
    through evaluation)."""
    token = _reporting.set(progress)
    try:
        yield
    finally:
        _reporting.reset(token)


def decode_rows(
    experiment,
    params,
    key: jax.Array,
    src: np.ndarray,
    max_out: int,
    lengths: np.ndarray | None = None,
    budget: int = BUDGET,
) -> np.ndarray:
    """Greedy answers [N, max_out] to sources [N, S] (with `lengths`, forced to those
    lengths), decoded chunk by chunk (`plan`), on a CPU one chunk per core at a time, in about
    `budget` bytes in all; row r reads positions drawn from `fold_in(key, r)`. Progress
    goes to `reporting`'s callback, as work done so far and in all (rows x steps x width
    attended)."""
    out = np.full((len(src), max_out), PAD_ID, np.int32)
    threads = devices.programs_side_by_side()
    chunks = plan(experiment, src, max_out, budget // threads, threads)

    def work(chunk) -> int:
        rows, width, out_width, _ = chunk
        return len(rows) * out_width * (width + out_width)

    def decode(chunk) -> np.ndarray:
        rows, width, out_width, size = chunk
        batch = np.full((size, width), PAD_ID, np.int32)  # extra rows: finished at once
        batch[: len(rows)] = src[rows, :width]
        ids = np.arange(size) + len(src)  # extra rows draw from keys no row uses
        ids[: len(rows)] = rows
        forced = np.full(size, FREE, np.int32)
        if lengths is not None:
            forced[: len(rows)] = lengths[rows]
        decoded, _ = answered(experiment, params, row_keys(key, ids), batch, out_width, forced)
        return np.asarray(decoded)[: len(rows)]

    # On a CPU, XLA runs a small program on one core: chunks side by side use the others.
    total, done = sum(map(work, chunks)), 0
    progress = _reporting.get() or (lambda done, total: None)
    progress(0, total)
    if len(chunks) == 1:
        out[:, : chunks[0][2]] = decode(chunks[0])
        progress(total, total)
        return out
    with ThreadPoolExecutor(threads) as pool:
        running = {pool.submit(decode, chunk): chunk for chunk in chunks}
        try:
            for finished in as_completed(running):
                chunk = running[finished]
                rows, _, out_width, _ = chunk
                out[rows, :out_width] = finished.result()
                done += work(chunk)
                progress(done, total)
        except BaseException:  # Ctrl-C: wait for the chunks under way only
            for future in running:
                future.cancel()
            raise
    return out
