"""Time one training run to its target accuracy in a fresh process (a helper of benchmarks/run.py).

    python benchmarks/solve_once.py --task copy --seed 0 [--steps N] [--set key=value ...]

Times `Trainer(experiment).run()`, compilation included, with the persistent
compilation cache off (`jabcli.core.runtime.configure(no_cache=True)`), and prints one JSON
line. Each run gets its own process so that no run reuses another's compiled code.
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=None, help="cap on the preset's train.steps")
    parser.add_argument("--set", dest="sets", action="append", default=[])
    args = parser.parse_args()

    from jabcli.core import runtime

    runtime.configure(no_cache=True)
    import jax

    from jabcli.experiment.resolve import resolve
    from jabcli.training.training import Trainer

    experiment = resolve(args.task, sets=args.sets, steps=args.steps, seed=args.seed)
    start = time.perf_counter()
    result = Trainer(experiment).run()
    wall = time.perf_counter() - start

    seq_acc = result.last_eval[0]["seq_acc"] if result.last_eval else 0.0
    print(
        json.dumps(
            {
                "task": args.task,
                "seed": args.seed,
                "wall_s": wall,
                "steps": result.step,
                "max_steps": experiment.config.train.steps,
                "seq_acc": seq_acc,
                "target_seq_acc": experiment.config.train.target_seq_acc,
                "reached": result.reached_target,
                "persistent_cache": jax.config.jax_compilation_cache_dir,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
