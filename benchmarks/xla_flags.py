"""Training steps/s under XLA's CPU options, each against jab's default, at the
throughput table's two shapes, packed: child processes taken in turns, so that the
machine's drift falls on every variant alike.

    python benchmarks/xla_flags.py [rounds] [variant ...]

Variants (all by default): `default` (no flag), `two-devices` (two host devices, the
batch split over them by jab's data-parallel sharding), `xnn-dot` (XNNPACK for dots),
`ynn-dot` (YNNPACK for dots), `onednn-dot` (oneDNN for dots), `xnn-graph` (XNNPACK's
greedy subgraph fusion), `fast-runtime` (XLA:CPU's run-time optimization preset).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import run

CHILD = """
import json, sys
sys.path.insert(0, {here!r})
from jabcli.core import runtime
runtime.configure()
import jax
import run
out = {{"devices": jax.device_count()}}
for name, shape in run.TRAIN_SHAPES.items():
    r = run.jab_train(shape, run.Sizes(train_repeats=5), run.TRAIN_DROPOUT, float("nan"))
    out[name] = r["steps_per_s"]
print(json.dumps(out))
"""
VARIANTS = {
    "default": "",
    "two-devices": "--xla_force_host_platform_device_count=2",
    "xnn-dot": "--xla_cpu_experimental_xnn_fusion_type=dot",
    "ynn-dot": "--xla_cpu_experimental_ynn_fusion_type=dot",
    "onednn-dot": "--xla_cpu_use_onednn=true --xla_cpu_experimental_onednn_fusion_type=dot",
    "xnn-graph": "--xla_cpu_experimental_xnn_graph_fusion_mode=XNN_GRAPH_FUSION_MODE_GREEDY",
    "fast-runtime": "--xla_cpu_opt_preset=CPU_OPT_PRESET_FAST_RUNTIME",
}
HERE = Path(__file__).parent


def measure(flags: str) -> dict:
    """Steps/s at both shapes in a child process run with `flags` as its XLA_FLAGS
    (the caller's own XLA_FLAGS are left out: each variant against no flag at all), or
    {"error": how the child ended} when it failed."""
    env = {**os.environ, "XLA_FLAGS": flags}
    _, result = run.run_json_child(["-c", CHILD.format(here=str(HERE))], env)
    return result


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    names = sys.argv[2:] or list(VARIANTS)
    unknown = [name for name in names if name not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variant {unknown[0]!r}; choose among {', '.join(VARIANTS)}")
    names = ["default", *(name for name in names if name != "default")]
    rows = []
    for round_ in range(1, rounds + 1):
        results = {name: measure(VARIANTS[name]) for name in names}
        assert results.get("two-devices", {}).get("devices", 2) == 2
        rows.append((round_, results))
    print("| round | variant | preset steps/s | / default | reference steps/s | / default |")
    print("|---:|---|---:|---:|---:|---:|")
    for round_, results in rows:
        base = results["default"]
        if "error" in base:
            raise SystemExit(base["error"])
        for name, got in results.items():
            if "error" in got:
                failed = got["error"].split(":", 1)[0]  # "exit N"
                print(f"| {round_} | {name} | failed ({failed}) | | | |")
                continue
            cells = [
                f"{got[shape]:.1f} | {got[shape] / base[shape]:.2f}×"
                for shape in ("preset", "reference")
            ]
            print(f"| {round_} | {name} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
