"""What jab sets for the device it computes on, the same on a CPU and a GPU unless said:

- float32 matrix products in float32 on every device (`configure`), where JAX's default
  lets a recent GPU round their inputs to TensorFloat-32 (10 bits of mantissa);
- a study's driver takes a GPU's memory as it needs it, not three quarters of it at its
  start, which would leave its cells the rest (`share_accelerator`);
- a Ray cell's worker: its share of a GPU's memory, or the CPU alone when it asked Ray for
  no GPU (`cell_environment`); which GPU it sees is Ray's to say (CUDA_VISIBLE_DEVICES);
- decoding's chunks side by side, one per core, on a CPU only (`programs_side_by_side`).

A setting the user made (JAX's own environment variables) is kept in every case.
"""

from __future__ import annotations

import os

# Every matmul of a float32 model, in full float32: the figures a GPU gives are then the
# CPU's to rounding, and jab's models (64-256 wide) gain little from TensorFloat-32.
MATMUL_PRECISION = "float32"
# What JAX's client takes of a whole GPU's memory by default (XLA_CLIENT_MEM_FRACTION).
JAX_MEMORY_FRACTION = 0.75
MEMORY_FRACTIONS = ("XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION")


def configure() -> None:
    """jab's JAX settings for every device: float32 matmuls in float32, unless the user
    chose a precision (JAX_DEFAULT_MATMUL_PRECISION, or `jax.config` in a notebook)."""
    import jax

    # jax.config's settings are attributes it makes at run time (no stubs for them)
    if jax.config.jax_default_matmul_precision is None:  # type: ignore[attr-defined]
        jax.config.update("jax_default_matmul_precision", MATMUL_PRECISION)


def share_accelerator() -> None:
    """For a process that starts others computing on this machine (a study's driver), before
    JAX starts its client: take GPU memory as it is needed, as the workers do, rather than
    JAX's three quarters at once. (No effect on a CPU.)"""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def cell_environment(gpus: float) -> dict[str, str]:
    """What a Ray cell's worker adds to its environment, for the `gpus` Ray assigned it:
    none, the CPU alone (JAX_PLATFORMS=cpu: the node's GPUs are for the cells that asked);
    part of one GPU, that part of JAX's share of its memory, so that the cells sharing it
    fit side by side and jab's memory checks refuse a config too large for the part; one
    or more whole GPUs, nothing (Ray's CUDA_VISIBLE_DEVICES names them)."""
    if gpus <= 0:
        return {} if "JAX_PLATFORMS" in os.environ else {"JAX_PLATFORMS": "cpu"}
    if gpus < 1 and not any(os.environ.get(name) for name in MEMORY_FRACTIONS):
        return {"XLA_PYTHON_CLIENT_MEM_FRACTION": f"{JAX_MEMORY_FRACTION * gpus:.4g}"}
    return {}


def programs_side_by_side() -> int:
    """How many small programs (decoding's chunks) to run at once: on a CPU one per core
    (at most 4), since XLA runs a small program on one core; on an accelerator one, which
    spreads each program over all of itself and gains nothing from smaller chunks."""
    import jax

    if jax.default_backend() != "cpu":
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(cores or 1, 4))
