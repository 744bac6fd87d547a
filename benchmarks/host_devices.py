"""Training steps/s on one CPU device against two host devices
(`XLA_FLAGS=--xla_force_host_platform_device_count=2`, the batch split over them by
jab's data-parallel sharding), at the throughput table's two shapes, packed, in child
processes taken in turns so that the machine's drift falls on both alike.

    python benchmarks/host_devices.py [rounds]
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
FLAG = "--xla_force_host_platform_device_count=2"
HERE = Path(__file__).parent


def measure(devices: int) -> dict:
    env = dict(os.environ)
    flags = env.get("XLA_FLAGS", "").replace(FLAG, "")
    env["XLA_FLAGS"] = f"{flags} {FLAG}".strip() if devices == 2 else flags.strip()
    _, result = run.run_json_child(["-c", CHILD.format(here=str(HERE))], env)
    if "error" in result:
        raise SystemExit(result["error"])
    return result


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    rows = []
    for _ in range(rounds):
        one, two = measure(1), measure(2)
        assert (one["devices"], two["devices"]) == (1, 2)
        rows.append((one, two))
    print("| round | shape | 1 device, steps/s | 2 host devices, steps/s | 2 / 1 |")
    print("|---:|---|---:|---:|---:|")
    for i, (one, two) in enumerate(rows, 1):
        for shape in ("preset", "reference"):
            ratio = two[shape] / one[shape]
            print(f"| {i} | {shape} | {one[shape]:.1f} | {two[shape]:.1f} | {ratio:.2f}× |")


if __name__ == "__main__":
    main()
