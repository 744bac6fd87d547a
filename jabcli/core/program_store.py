"""Compiled programs kept on disk whole (`stored_program`), found by what they compute,
so that the next process loads them instead of tracing and compiling again; checked by
their first run (`StoredProgram`); trimmed to a disk budget (`trim`)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import pickle
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jabcli.core import runtime
from jabcli.core.runtime import Keyed, keep, kept_path, versions
from jabcli.core.waiting import wait, waited

# `stored_program`: whether the compilation cache answered this thread's compilation,
# and one lock for compiling with that cache off.
_compiling = threading.local()
_uncached = threading.Lock()
_listening = False


def _on_event(event: str, **_: Any) -> None:
    if event == "/jax/compilation_cache/cache_hits" and getattr(_compiling, "on", False):
        _compiling.hit = True


def stored_program(
    experiment: Keyed,
    name: str,
    lower: Callable[[], Any],
    options: dict | None = None,
    donated: tuple[int, ...] = (),
) -> Callable:
    """The compiled program `lower()` lowers (a `jax.stages.Lowered`), kept on disk whole,
    so that the next process loads it in milliseconds instead of tracing and lowering it
    again to look it up in the compilation cache (half a second of a warm `jab predict`).
    `name` says which program and for which shapes. Off with the caches, and for `file:`
    tasks (as `remembered`).

    A program is stored under a digest of what it computes (its lowered text, argument
    and result trees, the arguments it reads, options, device and JAX's settings and the
    libraries' versions), and the
    experiment's config and `name` (`kept_path`, which adds jab's code) under a small
    file naming it: a warm start reads that name and loads the program without lowering
    anything, and a config that differs only where the program does not (`--steps`, say),
    or another version of jab whose program lowers to the same text, lowers it, finds it
    stored and compiles nothing.

    jaxlib 0.10 on the CPU does not always give back a program that runs: one the
    compilation cache handed over never does once stored again (it loads, then fails to
    run), so a program that cache already holds (compiled by an earlier version of jab,
    say) is compiled once more with it off, and that is stored; and a stored program
    that fails on its first run is removed and compiled again (`StoredProgram`).

    `options` are XLA's compiler options for it; `donated`, the positions of the
    arguments whose buffers it takes over (`jax.jit`'s `donate_argnums`), which a stored
    program's first run, the one that may fail, is given copies of."""
    import jax
    from jax.experimental import serialize_executable

    options = options or {}
    compile_ = functools.partial(_compile, lower, options)
    if not (runtime.caching and experiment.storable):
        return compile_()
    device = jax.devices()[0]
    machine = (
        f"{jax.device_count()} {device.platform} {device.device_kind} "
        f"{device.client.platform_version} with XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}"
        # settings that change what a function lowers to without changing jab's config
        f" x64={jax.config.jax_enable_x64} matmul={jax.config.jax_default_matmul_precision}"  # type: ignore[attr-defined]
        f" threefry={jax.config.jax_threefry_partitionable}"  # type: ignore[attr-defined]
    )
    pointer = kept_path(experiment, "programs", f"{name} on {machine}", ".key")
    with contextlib.suppress(Exception):  # absent or unreadable: look for the program
        program = _load(pointer.with_name(pointer.read_text().strip()), compile_, donated)
        with contextlib.suppress(OSError):
            os.utime(pointer)  # in use: the last of the names to be trimmed
        return program
    lowered = lower()
    whole = [lowered.as_text(debug_info=False), str(lowered.in_tree), str(lowered.out_tree)]
    # Which arguments the program reads: jit drops unused ones from the text, so two
    # functions reading different arguments of one type lower to the same text. JAX
    # keeps this set on a private attribute only.
    kept = getattr(lowered, "_lowering", None)
    whole.append(sorted(getattr(kept, "compile_args", {}).get("kept_var_idx", ())))
    whole += [options, machine, versions()]  # (not jab's code: the text says what it computes)
    digest = hashlib.sha256(json.dumps(whole, sort_keys=True, default=str).encode())
    path = pointer.with_name(f"{digest.hexdigest()}.bin")
    try:
        program = _load(path, compile_, donated)
    except Exception:  # absent or unreadable: compile it
        program = _compiled(lambda: lowered, options)
        try:
            data = pickle.dumps(serialize_executable.serialize(program))
        except Exception:  # one that cannot be stored (a call back to Python, say) is not
            return program
        keep(path, data)
    keep(pointer, path.name.encode())
    trim(path.parent, PROGRAMS_BYTES)  # a new program or a new name of one
    return program


def _load(path: Path, compile_: Callable[[], Any], donated: tuple[int, ...]) -> StoredProgram:
    """The program stored at `path`, marked as used now (the last to be trimmed)."""
    from jax.experimental import serialize_executable

    program = serialize_executable.deserialize_and_load(*pickle.loads(path.read_bytes()))
    with contextlib.suppress(OSError):
        os.utime(path)
    return StoredProgram(program, path, compile_, donated)


def _compiled(lower: Callable[[], Any], options: dict) -> Any:
    """`lower().compile()`, once more without the compilation cache if that cache handed
    it over (such a program does not run once stored)."""
    global _listening
    import jax

    if not _listening:
        jax.monitoring.register_event_listener(_on_event)
        _listening = True
    lowered = lower()

    def compile_watched() -> tuple[Any, bool]:  # in `waited`'s thread, which it watches
        _compiling.on, _compiling.hit = True, False
        try:
            return lowered.compile(compiler_options=options or None), _compiling.hit
        finally:
            _compiling.on = False

    compiled, hit = waited(compile_watched)
    return uncached(lower, options) if hit else compiled


PROGRAMS_BYTES = 512 * 2**20  # what the stored programs may take on disk, at most
POINTERS = 4096  # and how many names of them (`.key`: one per config and program) at most


def trim(folder: Path, most: int, names: int = POINTERS) -> None:
    """Remove the programs of `folder` used longest ago until they take at most `most`
    bytes, the names (`.key`) of programs no longer there or that cannot be read, and
    the names used longest ago beyond `names`: every model, shape and version of jab
    stores its own programs (a few MB each), and every config its names, which would
    otherwise pile up."""
    try:
        files = [(f.stat(), f) for f in folder.glob("*.bin")]
        pointers = [(f.stat(), f) for f in folder.glob("*.key")]
    except OSError:  # another process trimming at the same time
        return
    files.sort(key=lambda found: found[0].st_mtime, reverse=True)  # the newest first
    total = 0
    for stat, f in files:
        total += stat.st_size
        if total > most:
            f.unlink(missing_ok=True)
    pointers.sort(key=lambda found: found[0].st_mtime, reverse=True)
    for i, (_, pointer) in enumerate(pointers):
        with contextlib.suppress(OSError):
            try:
                named = pointer.with_name(pointer.read_text().strip())
            except ValueError:  # empty: names nothing
                named = None
            if i >= names or named is None or not named.exists():
                pointer.unlink()


# An XLA option at its default: asking for it explicitly makes `uncached`'s compilation
# one JAX has not kept in memory either, so that it is compiled, not handed back again.
AS_DEFAULT = {"xla_cpu_enable_fast_math": False}


def _compile(lower: Callable[[], Any], options: dict) -> Any:
    """`lower().compile()`, the compilation waited for (`waited`)."""
    lowered = lower()
    return waited(lambda: lowered.compile(compiler_options=options or None))


def uncached(lower: Callable[[], Any], options: dict) -> Any:
    """`lower().compile()` afresh: with the compilation cache off (for the whole process,
    a moment: another thread compiling meanwhile compiles without it too) and none of
    JAX's compiled programs in memory reused."""
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    with _uncached:
        jax.config.update("jax_enable_compilation_cache", False)
        compilation_cache.reset_cache()  # it decides once per process whether it is on
        try:
            return _compile(lower, {**AS_DEFAULT, **options})
        finally:
            jax.config.update("jax_enable_compilation_cache", True)
            compilation_cache.reset_cache()


class StoredProgram:
    """A program `stored_program` read from `path`, checked by its first run: if that
    fails, the stored copy is removed and the program compiled (`compile_`) instead. That
    first run is given copies of the arguments at the `donated` positions, so that a
    failure leaves the caller's buffers whole for the program compiled here. What XLA
    says of the program (`memory_analysis`, `cost_analysis`) is the stored program's."""

    def __init__(
        self, program: Any, path: Path, compile_: Callable[[], Any], donated: tuple[int, ...]
    ) -> None:
        self.program, self.path, self.compile, self.donated = program, path, compile_, donated
        self.ran = False

    def __call__(self, *args: Any) -> Any:
        if self.ran:
            return self.program(*args)
        import jax

        given = [
            jax.device_put(a, may_alias=False) if i in self.donated else a  # (copies)
            for i, a in enumerate(args)
        ]
        try:
            out = jax.block_until_ready(wait(self.program(*given)))  # (errors raise here)
        except jax.errors.JaxRuntimeError:  # loaded, but does not run: compile it here
            self.path.unlink(missing_ok=True)
            self.program = self.compile()
            out = self.program(*args)
        self.ran = True
        return out

    def __getattr__(self, name: str) -> Any:
        if name == "program":  # not set yet: no recursion
            raise AttributeError(name)
        return getattr(self.program, name)
