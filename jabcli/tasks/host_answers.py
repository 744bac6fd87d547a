"""A task with `solve` alone, answered on the host: the training step draws its sources on
the device and `jax.pure_callback` hands them to `solve`, row by row. The host's answers to
the next step's batch begin while the device trains on this one (`begin_next`), in a
thread of their own, so that most of `solve`'s time hides behind the step's
(docs/own-task.md#solve-alone gives the cost, measured).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from jabcli.core.errors import UserCodeError
from jabcli.core.runtime import Lazy
from jabcli.tasks.contract import Task

if TYPE_CHECKING:
    import jax
    import jax.numpy as jnp
    import numpy as np
else:
    jax, jnp, np = Lazy("jax"), Lazy("jax.numpy"), Lazy("numpy")

BEGUN_AT_MOST = 64  # answers begun and not yet asked for (one per seed and step)


def solved_on_host(cls: type[Task]) -> type[Task]:
    """`cls`, whose answers for training are its `solve`'s, computed on the host for each
    batch the device draws: a task needs no array code to train, at a cost."""

    class Solved(cls):  # type: ignore[valid-type, misc]
        solved_on_host = True

        def targets(self, tokens, lengths):
            return host_targets(self, tokens, lengths)

    Solved.__name__, Solved.__qualname__ = cls.__name__, cls.__qualname__
    Solved.__module__ = cls.__module__
    return Solved


def answered_on_host(task: Task) -> bool:
    """Whether `task` (or the task it wraps, for index hints) is answered by `solve`."""
    return bool(getattr(getattr(task, "task", task), "solved_on_host", False))


class Answers:
    """The host's side: `solve` over a batch's rows, and the batches begun ahead, by
    their content (the device asks for the same sources one step later)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.begun: OrderedDict[tuple, Future] = OrderedDict()
        self.pool: ThreadPoolExecutor | None = None
        self.asked = self.found_begun = 0  # batches asked for, and of those, found begun
        self.failed: UserCodeError | None = None  # what `solve` raised (`failure`)

    def begin(self, task: Task, tokens: Any, lengths: Any, width: int) -> None:
        key = content(task, tokens, lengths)
        with self.lock:
            if self.pool is None:
                self.pool = ThreadPoolExecutor(1, thread_name_prefix="jab-solve")
            if key not in self.begun:
                self.begun[key] = self.pool.submit(solve_rows, task, tokens, lengths, width)
            while len(self.begun) > BEGUN_AT_MOST:
                self.begun.popitem(last=False)

    def get(self, task: Task, tokens: Any, lengths: Any, width: int) -> tuple[Any, Any]:
        with self.lock:
            begun = self.begun.pop(content(task, tokens, lengths), None)
            self.asked += 1
            self.found_begun += begun is not None
        if begun is not None:
            return begun.result()
        return solve_rows(task, tokens, lengths, width)


ANSWERS = Answers()


def _quiet_when_solve_failed(record: logging.LogRecord) -> bool:
    """JAX logs a failed callback's whole traceback, jab's frames and its own; jab shows
    the user's (`failure`) instead."""
    return ANSWERS.failed is None


logging.getLogger("jax._src.callback").addFilter(_quiet_when_solve_failed)


def failure() -> UserCodeError | None:
    """The exception `solve` raised on the host last, as the user's own traceback (a
    `UserCodeError`), once: JAX reports an exception inside a callback as its text."""
    failed, ANSWERS.failed = ANSWERS.failed, None
    return failed


_ahead = threading.local()  # set while the next step's batch is traced


def content(task: Task, tokens: Any, lengths: Any) -> tuple:
    """What a batch's answers are known by: its task (its class and options) and sources."""
    tokens, lengths = np.asarray(tokens), np.asarray(lengths)
    return type(task), task, tokens.shape, tokens.tobytes(), lengths.tobytes()


def solve_rows(task: Task, tokens: Any, lengths: Any, width: int) -> tuple[Any, Any]:
    """`solve`'s answers to sources [B, S] of `lengths` [B]: target ids [B, width] and
    their lengths [B]."""
    tokens, lengths = np.asarray(tokens), np.asarray(lengths)
    out = np.zeros((tokens.shape[0], width), np.int32)
    sizes = np.zeros((tokens.shape[0],), np.int32)
    for row, (ids, length) in enumerate(zip(tokens, lengths)):
        text = task.tokenizer.decode(ids[: int(length)])
        try:
            solved = task.solve(text) or ""
        except Exception as err:  # JAX passes on only its text: keep it whole for jab
            files = {getattr(sys.modules.get(type(task).__module__), "__file__", None) or ""}
            ANSWERS.failed = UserCodeError(f"{task.name}'s solve({text!r})", err, files)
            raise
        answer_ids = task.tokenizer.ids(solved)[:width]
        out[row, : len(answer_ids)] = answer_ids
        sizes[row] = len(answer_ids)
    return out, sizes


def host_targets(task: Task, tokens: Any, lengths: Any) -> Any:
    """`solve`'s answers to sources [B, S] of `lengths` [B], as target ids [B, W] (W: the
    task's `output_length` of S) and their lengths [B], from the host. While `begin_next`
    traces the next step's batch, the answers are only begun, and stand-in zeros go on."""
    rows, width = tokens.shape[0], int(task.output_length(tokens.shape[1]))
    if getattr(_ahead, "begun", None) is not None:

        def begin(tokens, lengths):
            ANSWERS.begin(task, tokens, lengths, width)
            return np.zeros((), np.float32)

        done = jax.ShapeDtypeStruct((), jnp.float32)
        _ahead.begun.append(
            jax.pure_callback(begin, done, tokens, lengths, vmap_method="sequential")
        )
        return jnp.zeros((rows, width), jnp.int32), jnp.zeros((rows,), jnp.int32)

    def answer(tokens, lengths):
        return ANSWERS.get(task, tokens, lengths, width)

    shapes = (
        jax.ShapeDtypeStruct((rows, width), jnp.int32),
        jax.ShapeDtypeStruct((rows,), jnp.int32),
    )
    return jax.pure_callback(answer, shapes, tokens, lengths, vmap_method="sequential")


def begin_next(draw: Callable[[], Any]) -> Any:
    """Trace `draw` (the next training step's batch, inside this step) so that the host
    begins its answers now, while the device trains. Returns 0.0, which the caller adds
    to a value it keeps: a callback whose result goes unused is dropped from the program."""
    with _beginning() as begun:
        draw()
    return sum(begun, jnp.zeros((), jnp.float32))


@contextmanager
def _beginning() -> Iterator[list]:
    begun: list[jax.Array] = []
    _ahead.begun = begun
    try:
        yield begun
    finally:
        _ahead.begun = None
