"""How much memory a run needs, and whether the machine has it.

Training's programs are compiled before anything is allocated, and XLA's own memory
analysis of a compiled program says what it will need (parameters, optimizer state,
activations, scratch). Evaluation's held-out sample is counted from its shape. A run
that would not fit is refused with one line naming the figure, the memory available
and the options that lower it, instead of being killed by the kernel or failing deep
inside XLA.
"""

from __future__ import annotations

from jabcli.core.errors import JabError

HEADROOM = 0.75  # leave a quarter to XLA's runtime, the host side and everything else


def available_bytes() -> int | None:
    """Memory the default device can still give: on an accelerator (a GPU), what XLA's
    allocator of its first device may still hand out (its limit, JAX's share of the
    device or a Ray cell's part of it, less what is in use), never the host's; on a CPU,
    MemAvailable of the host; None when unknown."""
    import jax

    device = jax.devices()[0]
    if device.platform != "cpu":
        stats = device.memory_stats() or {}
        if "bytes_limit" in stats:
            return stats["bytes_limit"] - stats.get("bytes_in_use", 0)
        return None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def program_bytes(compiled) -> int:
    """What one compiled program needs at its peak: arguments, outputs (less what the
    arguments' buffers are reused for) and scratch."""
    stats = compiled.memory_analysis()
    if stats is None:
        return 0
    peak = getattr(stats, "peak_memory_in_bytes", 0)
    total = (
        stats.argument_size_in_bytes
        + stats.output_size_in_bytes
        - stats.alias_size_in_bytes
        + stats.temp_size_in_bytes
    )
    return max(peak, total)


def size(num_bytes: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if num_bytes < 1024 or unit == "GiB":
            return f"{num_bytes:.0f} {unit}" if unit == "bytes" else f"{num_bytes:.1f} {unit}"
        num_bytes /= 1024
    raise AssertionError


def tree_bytes(tree) -> int:
    """The size of a tree of arrays (or of shapes, from `jax.eval_shape`)."""
    import jax

    return sum(x.size * x.dtype.itemsize for x in jax.tree_util.tree_leaves(tree))


def memory_name() -> str:
    """What a refusal calls the memory `available_bytes` counts: the host's "memory" on a
    CPU, "GPU memory" on a GPU."""
    import jax

    platform = jax.devices()[0].platform
    return "memory" if platform == "cpu" else f"{platform.upper()} memory"


def check(need: int, what: str, lower: str) -> None:
    """Refuse `what` when it needs more than the machine can give."""
    free = available_bytes()
    if free is not None and need > HEADROOM * free:
        raise JabError(
            f"{what} needs about {size(need)} of {memory_name()}, but only {size(free)} is "
            f"available; lower {lower}"
        )
