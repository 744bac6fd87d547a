"""Compare two folders written by benchmarks/same_runs.sh: every metrics.jsonl (timings
aside), every checkpoint array, every evaluation, prediction and heatmap must be equal.

    python benchmarks/same_runs.py BEFORE AFTER
"""

import json
import sys
from pathlib import Path

import numpy as np

TIMING = {"steps_per_sec", "elapsed_s"}


def metrics(path: Path) -> list[dict]:
    return [
        {k: v for k, v in json.loads(line).items() if k not in TIMING}
        for line in path.read_text().splitlines()
    ]


def main(before: Path, after: Path) -> int:
    same_everywhere = True

    def report(same: bool, what: str) -> None:
        nonlocal same_everywhere
        same_everywhere &= same
        print(f"{'same' if same else 'DIFFERENT':9} {what}")

    for path in sorted(before.rglob("metrics.jsonl")):
        rel = path.relative_to(before)
        report(metrics(path) == metrics(after / rel), f"{rel} ({len(metrics(path))} records)")
    for name in [p.name for p in sorted(before.glob("*.eval.json"))] + [
        "predict-hints.txt",
        "attn.txt",
    ]:  # each run's folder is named in what it prints: the same name on both sides
        text = (after / name).read_text().replace(str(after), str(before))
        report((before / name).read_text() == text, name)
    for path in sorted(before.rglob("*.npz")):
        with np.load(path) as a, np.load(after / path.relative_to(before)) as b:
            same = a.files == b.files and all(np.array_equal(a[k], b[k]) for k in a.files)
        report(same, str(path.relative_to(before)))
    print("ALL SAME" if same_everywhere else "SOME DIFFER")
    return 0 if same_everywhere else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
