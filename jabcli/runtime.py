"""Process-wide JAX settings, applied before the first compilation, and JAX imported on
first use by modules that commands which never compute also read (`jab tasks`)."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any


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


def configure(no_cache: bool = False) -> None:
    """Turn on JAX's persistent compilation cache unless --no-cache or JAB_NO_CACHE=1;
    only the process's first call counts (the CLI's, before the API's it calls)."""
    global configured
    if configured:
        return
    configured = True
    import jax

    if no_cache or os.environ.get("JAB_NO_CACHE", "") not in ("", "0"):
        return
    jax.config.update("jax_compilation_cache_dir", str(cache_dir()))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
