"""Where `jab eval --lengths 41-500 --samples 4` of a group spends its time: each seed's
evaluation in turn in one process (the first compiles the decoding programs, the others
reuse them), the chunks `decode.plan` cuts, and the same with other decoding budgets.

    jab train --task reverse --seeds 3 --steps 300 --set task.max_len=40 \\
        --set model.pos_encoding=coupled --out /tmp/evgroup
    JAX_ENABLE_COMPILATION_CACHE=false python benchmarks/eval_profile.py /tmp/evgroup
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from jabcli.evaluation import decode
from jabcli.evaluation.evaluate import HeldOut
from jabcli.inspection import inspection

BUDGETS = (1 << 26, 1 << 27, 1 << 30)  # bytes; decode.BUDGET is 256 MiB


def main() -> None:
    start = time.perf_counter()
    _, seeds = inspection.load_runs(Path(sys.argv[1]))
    print(f"load: {time.perf_counter() - start:.2f} s", flush=True)
    held_out = HeldOut(samples=4, min_len=41, max_len=500, each_length=True)
    planned = decode.plan

    def plan(*args, **kwargs):
        chunks = planned(*args, **kwargs)
        shapes = sorted({(width, out, rows) for _, width, out, rows in chunks})
        print(f"  {len(chunks)} chunks, (source width, answer width, rows): {shapes}")
        return chunks

    decode.plan = plan
    for budget in (decode.BUDGET, *BUDGETS):
        decode.decode_rows.__defaults__ = (None, budget)
        for one in seeds:
            start = time.perf_counter()
            result = inspection.evaluate_run(one, held_out, seed=0)
            print(
                f"budget {budget >> 20} MiB, {one.run.path.name}: "
                f"{time.perf_counter() - start:.1f} s, exact match {result['seq_acc']:.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
