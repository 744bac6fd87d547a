"""Several seeds in one process against one process per seed.

For N = 1, 2, 4, 8 seeds of a preset (default reverse: d_model 64, batch 64, lengths
1-16), times the whole `jab train --seeds N` process and N `jab train --seed i`
processes run one after another, each for --steps steps with early stop and
evaluation pushed out of the way (train.target_seq_acc 1, one evaluation at the end),
with a warm compilation cache (one untimed run of each first). Reports wall times,
models x steps per second and the peak memory (max RSS) of the one process:

    python benchmarks/seeds.py [--task reverse] [--steps 300] [--seeds 1,2,4,8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent


def jab_train(task: str, steps: int, cwd: Path, out: str, *extra: str) -> tuple[float, int]:
    """Wall seconds and max RSS (bytes) of one `jab train` process."""
    args = [
        sys.executable, "-m", "jabcli", "train", "--task", task, "--steps", str(steps),
        "--set", "train.target_seq_acc=1.0", "--set", f"train.eval_every={steps}",
        "--set", "train.eval_samples=64", "--out", out, *extra,
    ]  # fmt: skip
    tic = time.perf_counter()
    proc = subprocess.Popen(args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - tic
    if status != 0:
        raise SystemExit(f"jab train failed: {proc.stderr.read().decode()}")
    return seconds, 1024 * usage.ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="reverse")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seeds", default="1,2,4,8")
    parser.add_argument("--out", type=Path, default=HERE / "seeds.json")
    args = parser.parse_args()
    counts = [int(n) for n in args.seeds.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        jab_train(args.task, args.steps, cwd, "warm-1")  # fills the compilation cache
        for n in counts:
            if n > 1:
                jab_train(args.task, args.steps, cwd, f"warm-{n}", "--seeds", str(n))
            together, peak = jab_train(
                args.task, args.steps, cwd, f"together-{n}", "--seeds", str(n)
            )
            apart = sum(
                jab_train(args.task, args.steps, cwd, f"apart-{n}-{i}", "--seed", str(i))[0]
                for i in range(n)
            )
            rows.append(
                {
                    "seeds": n,
                    "one_process_s": together,
                    "separate_processes_s": apart,
                    "one_process_model_steps_per_s": n * args.steps / together,
                    "separate_model_steps_per_s": n * args.steps / apart,
                    "max_rss_bytes": peak,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    base = rows[0]["one_process_s"] if counts[0] == 1 else None
    table = Table(
        title=f"jab train --task {args.task} --steps {args.steps}: N seeds in one process "
        "against N processes one after another (whole processes, warm cache)"
    )
    for column in (
        "seeds", "one process", "× 1 seed's time", "N processes", "speed-up",
        "model-steps/s (one)", "model-steps/s (N)", "peak memory",
    ):  # fmt: skip
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            str(r["seeds"]),
            f"{r['one_process_s']:.1f} s",
            f"{r['one_process_s'] / base:.2f}×" if base else "-",
            f"{r['separate_processes_s']:.1f} s",
            f"{r['separate_processes_s'] / r['one_process_s']:.2f}×",
            f"{r['one_process_model_steps_per_s']:.1f}",
            f"{r['separate_model_steps_per_s']:.1f}",
            f"{r['max_rss_bytes'] / 2**20:.0f} MiB",
        )
    Console(width=160).print(table)
    args.out.write_text(json.dumps({"task": args.task, "steps": args.steps, "rows": rows}))


if __name__ == "__main__":
    main()
