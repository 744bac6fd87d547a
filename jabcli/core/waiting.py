"""Waiting for a computation or a compilation in short sleeps rather than inside XLA, so
that a signal (Ctrl-C) is answered meanwhile, calling what `polling` set between sleeps."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

_polled: ContextVar[Callable[[], Any]] = ContextVar("polled", default=lambda: None)


@contextlib.contextmanager
def polling(meanwhile: Callable[[], Any]):
    """Within it, `wait` and `waited` call `meanwhile()` between their sleeps: the
    training session's stop request, which then says in this thread (not in its signal
    handler) that a signal came, while a chunk runs (a stored chunk's first, checked run
    too) or the model compiles."""
    token = _polled.set(meanwhile)
    try:
        yield
    finally:
        _polled.reset(token)


def wait(tree: Any) -> Any:
    """`tree` once computed. Waits in short sleeps rather than inside XLA, so that signal
    handlers run meanwhile (a computation that never ends can still be interrupted),
    calling what `polling` set between sleeps."""
    import jax

    leaves = jax.tree_util.tree_leaves(tree)
    meanwhile = _polled.get()
    while not all(leaf.is_ready() for leaf in leaves):
        time.sleep(0.002)
        meanwhile()
    return tree


def waited(work: Callable[[], Any]) -> Any:
    """`work()` (an XLA compilation: seconds to tens of seconds for a large model) run in
    a thread of its own while this one waits in short sleeps, calling what `polling` set
    between them: no signal handler of this thread could run while it compiled, so a
    Ctrl-C waited for the compilation to end. Its result, or its exception."""
    results: list[Any] = []
    errors: list[BaseException] = []  # handed to the waiting thread

    def run() -> None:
        try:
            results.append(work())
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=run, name="jab compiling", daemon=True)
    thread.start()
    meanwhile = _polled.get()
    while thread.is_alive():
        thread.join(0.01)
        meanwhile()
    if errors:
        raise errors[0]
    return results[0]
