"""A task of the user's own trained with `targets` (array code, inside the training step)
and with `solve` alone (answered on the host for every batch, jax.pure_callback): steps/s
of each, side by side, in one process, turns alternating.

    python benchmarks/solve_on_host.py [--steps 600] [--turns 3]

The task is docs/own-task.md's worked example (the last symbol, then the first) on the
reverse preset's model and lengths (1-16, batch 64, 2 layers of width 64)."""

import argparse
import re
import statistics
import tempfile
import time
from pathlib import Path

import jabcli as jab

DOC = Path(__file__).resolve().parents[1] / "docs" / "own-task.md"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--turns", type=int, default=3)
    args = parser.parse_args()
    example = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    solve_only = re.sub(r"\n    def targets\(.*", "\n", example, flags=re.S)
    folder = Path(tempfile.mkdtemp(prefix="jab-solve-"))
    (folder / "with_targets.py").write_text(example)
    (folder / "solve_only.py").write_text(solve_only)
    rates: dict[str, list[float]] = {"targets": [], "solve alone": []}
    for turn in range(args.turns):
        for kind, file in (("targets", "with_targets.py"), ("solve alone", "solve_only.py")):
            out = folder / f"{file}-{turn}"
            run = jab.train(f"{folder / file}:Ends", steps=args.steps,
                            overrides={"train.target_seq_acc": 1.0}, out=out)  # fmt: skip
            records = [r for r in run.metrics() if "elapsed_s" in r]
            first, last = records[0], records[-1]  # from the first log, after compiling
            rates[kind].append(
                (last["step"] - first["step"]) / (last["elapsed_s"] - first["elapsed_s"])
            )
    print(f"| answers | steps/s, median [min-max] of {args.turns} runs of {args.steps} steps |")
    print("|---|---:|")
    for kind, values in rates.items():
        print(f"| {kind} | {statistics.median(values):.1f} [{min(values):.1f}-{max(values):.1f}] |")
    ratio = statistics.median(rates["solve alone"]) / statistics.median(rates["targets"])
    print(f"\nsolve alone / targets: {ratio:.2f}x  ({time.strftime('%Y-%m-%d')})")


if __name__ == "__main__":
    main()
