"""Process-wide JAX settings, applied before the first compilation; JAX imported on
first use by modules that commands which never compute also read (`jab tasks`); Python's
garbage collection held back while the `jab` process imports; and what is kept on disk
for an experiment beside the compilation cache: where (`kept_path`, under a digest of its
config, jab's code and the libraries' versions), written whole (`keep`), and the facts
about a model that take tracing to find (`remembered`). Its compiled programs are
program_store.py's; waiting for them in short sleeps, waiting.py's."""

from __future__ import annotations

import functools
import gc
import hashlib
import importlib
import json
import os
import pickle
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from jabcli.core.tokenizer import Tokenizer


class Lazy:
    """A module imported when one of its attributes is first used: `jnp = Lazy("jax.numpy")`
    costs nothing until `jnp.where(...)` runs (importing JAX takes most of a second)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self.name), attribute)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "jab" / "xla"


configured = False  # the first call decides, for the whole process
caching = False  # whether the caches are on (configure)
held = False  # whether garbage collection is held back (hold_collections)


def hold_collections() -> None:
    """Hold Python's garbage collection back until JAX is imported (`configure`), in the
    `jab` process (not in a notebook's or a test's). Importing JAX makes some 200,000
    objects and almost no garbage (a thousand objects), and the collections that walked
    them again and again took 0.1-0.3 s of a warm `jab predict`; once JAX is in, what
    the imports made is frozen (`gc.freeze`: never walked again) and collection resumes.
    A command that never imports JAX (`jab tasks`) ends before collecting anything."""
    global held
    gc.disable()
    held = True


def configure(no_cache: bool = False) -> None:
    """Apply jab's settings for every device (`devices.configure`), and turn on JAX's
    persistent compilation cache, and `remembered`, unless --no-cache or JAB_NO_CACHE=1;
    only the process's first call counts (the CLI's, before the API's it calls).
    Collection held back (`hold_collections`) resumes here."""
    global configured, caching, held
    if configured:
        return
    configured = True
    import jax

    from jabcli.core import devices

    devices.configure()
    if held:
        gc.freeze()
        gc.enable()
        held = False
    if no_cache or os.environ.get("JAB_NO_CACHE", "") not in ("", "0"):
        return
    caching = True
    jax.config.update("jax_compilation_cache_dir", str(cache_dir()))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)


class Keyed(Protocol):
    """What the facts and programs kept on disk read of what they are kept for: an
    experiment (experiment/experiment.py's `Experiment`, a layer above, which is why it is
    named here by what it has rather than imported)."""

    @property
    def keyed_settings(self) -> str:
        """Its config as JSON text, a user's file named by its class alone (its code is in
        code_digest)."""

    @property
    def tokenizer(self) -> Tokenizer: ...

    @property
    def code_digest(self) -> str:
        """A digest of the user's own code it runs ("" for jab's own)."""

    @property
    def storable(self) -> bool:
        """Whether what is compiled for it may be kept on disk at all."""


@functools.cache
def source_digest() -> str:
    """A digest of jab's own code: what another version traced (a model's facts, the
    name of a config's program) is never reused; a program, found by what it computes,
    is."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent.parent  # jabcli/, every layer's folder in it
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()


def remembered(experiment: Keyed, name: str, compute: Callable[[], Any]) -> Any:
    """`compute()`, a small picklable fact about the experiment's model that takes tracing
    to find (its parameters' shapes, say), kept on disk beside the compilation cache
    under a digest of `name`, the experiment's config and vocabulary, jab's code and the
    libraries' versions, so that the next process reads it instead of tracing again.
    `file:` tasks are not kept (their data, not only their config, shapes the model's
    programs)."""
    if not (caching and experiment.storable):
        return compute()
    path = kept_path(experiment, "facts", name, ".pkl")
    try:
        return pickle.loads(path.read_bytes())
    except Exception:  # absent or unreadable: find it again
        value = compute()
    keep(path, pickle.dumps(value))
    return value


def kept_path(experiment: Keyed, kind: str, name: str, suffix: str) -> Path:
    """Where `remembered` or `stored_program` keeps `name` for the experiment: a digest of
    it, the experiment's config and vocabulary, jab's code and the libraries' versions."""
    import jax

    whole = [
        name,
        experiment.keyed_settings,  # its config, a user's file named by its class
        experiment.tokenizer.tokens,  # a run keeps its own vocabulary
        source_digest(),
        experiment.code_digest,  # the user's own code, where it runs any
        versions(),
        str(jax.config.jax_default_prng_impl),  # type: ignore[attr-defined]  # made at run time
    ]
    digest = hashlib.sha256(json.dumps(whole, sort_keys=True, default=str).encode()).hexdigest()
    return cache_dir().parent / kind / f"{digest}{suffix}"


def keep(path: Path, data: bytes) -> None:
    """Write `data` to `path` whole or not at all; a cache that cannot be written only
    costs the next start time."""
    temporary = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as out:
            temporary = out.name
            out.write(data)
        os.replace(temporary, path)
    except Exception:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)


@functools.cache
def versions() -> list[str]:
    """The versions of the libraries that decide a model's parameters and state."""
    from importlib import metadata

    return [metadata.version(package) for package in ("jax", "jaxlib", "dm-haiku", "optax")]
