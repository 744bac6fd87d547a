"""A task of the user's own trained with `targets` (array code, inside the training step)
and with `solve` alone (answered on the host for every batch, jax.pure_callback), its
answers begun a step ahead as jab trains (host_answers.begin_next) and, for comparison,
waited for inside each step: steps/s of each, side by side, in one process, turns
alternating.

    python benchmarks/solve_on_host.py [--steps 600] [--turns 3] [--solve-repeats 1]

The task is docs/own-task.md's worked example (the last symbol, then the first) on the
reverse preset's model and lengths (1-16, batch 64, 2 layers of width 64)."""

import argparse
import re
import statistics
import tempfile
import time
from pathlib import Path

import jabcli as jab
from jabcli.tasks import host_answers
from jabcli.training import training

DOC = Path(__file__).resolve().parents[1] / "docs" / "own-task.md"


SLOWER = """
_solve = Ends.solve


def _repeated(self, text):
    for _ in range({repeats} - 1):
        _solve(self, text)
    return _solve(self, text)


Ends.solve = _repeated
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument(
        "--solve-repeats",
        type=int,
        default=1,
        help="call solve this many times per input, for a task whose solve costs more",
    )
    args = parser.parse_args()
    example = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    solve_only = re.sub(r"\n    def targets\(.*", "\n", example, flags=re.S)
    solve_only += SLOWER.format(repeats=args.solve_repeats)
    folder = Path(tempfile.mkdtemp(prefix="jab-solve-"))
    (folder / "with_targets.py").write_text(example)
    (folder / "solve_only.py").write_text(solve_only)
    begin_next = host_answers.begin_next
    kinds = {
        "targets": "with_targets.py",
        "solve alone, begun a step ahead": "solve_only.py",
        "solve alone, waited for in the step": "solve_only.py",
    }
    rates: dict[str, list[float]] = {kind: [] for kind in kinds}
    for turn in range(args.turns):
        for kind, file in kinds.items():
            waits = kind.endswith("in the step")
            host_answers.begin_next = (lambda draw: 0.0) if waits else begin_next
            training.compiled_of.cache_clear()  # the two ways of solving are two programs
            out = folder / f"{kind.replace(' ', '-').replace(',', '')}-{turn}"
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
    print()
    for kind in list(kinds)[1:]:
        ratio = statistics.median(rates[kind]) / statistics.median(rates["targets"])
        print(f"{kind} / targets: {ratio:.2f}x")
    print(f"({time.strftime('%Y-%m-%d %H:%M')})")


if __name__ == "__main__":
    main()
