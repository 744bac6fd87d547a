"""Training steps/s of the Tape-RNN on binary duplicate (lengths 1-40, batch 128, 256
units, one seed: the paper's shape) with a tape of 512 cells against a tape that grows
with the input (`model.memory_grows`), each in a child process of its own, in turns.

    python benchmarks/tape_memory.py [rounds]
"""

from __future__ import annotations

import sys

import run

CHILD = """
import json, time
from jabcli.core import runtime
runtime.configure()
import jax, jax.numpy as jnp
from jabcli.experiment.resolve import resolve
from jabcli.training.training import Trainer
sets = ["task.alphabet=01", "task.max_len=40", "model.arch=tape_rnn", "model.d_model=256",
        "train.batch_size=128", "train.log_every=5", {memory!r}]
trainer = Trainer(resolve("duplicate", sets=sets))
state, steps = trainer.state, jnp.asarray(5, jnp.int32)
state, _ = trainer.chunk(state, steps)
jax.block_until_ready(state)
rates = []
for _ in range(3):
    start = time.perf_counter()
    state, _ = trainer.chunk(state, steps)
    jax.block_until_ready(state)
    rates.append(5 / (time.perf_counter() - start))
print(json.dumps({{"steps_per_s": sorted(rates)[1]}}))
"""
MEMORIES = {"512 cells": "model.memory_size=512", "grows": "model.memory_grows=true"}


def measure(memory: str) -> float:
    _, result = run.run_json_child(["-c", CHILD.format(memory=memory)])
    if "error" in result:
        raise SystemExit(result["error"])
    return result["steps_per_s"]


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    print("| round | tape | steps/s (median of 3 chunks of 5) |")
    print("|---:|---|---:|")
    for i in range(1, rounds + 1):
        for name, memory in MEMORIES.items():
            print(f"| {i} | {name} | {measure(memory):.2f} |", flush=True)


if __name__ == "__main__":
    main()
