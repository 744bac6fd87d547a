"""Did it learn the algorithm, or the lengths it saw? A study you can rerun.

Trains reverse, copy and sort on inputs of length 1-16 with each positional encoding
(`model.pos_encoding`), everything else as in the task's preset, for the preset's
step budget with no early stop, then measures exact match on fresh held-out inputs at
every length 1-64 and reports it over 1-16 (the training range), 17-32 and 33-64.
Every (task, encoding) pair trains --seeds models (3 by default) side by side, as
`jab train --seeds` does, and every figure is their median [min-max].

    python benchmarks/length_generalization.py            # the full study (~30 min, 2 cores)
    python benchmarks/length_generalization.py --quick    # a smoke test of the script
    python benchmarks/length_generalization.py --encodings randomized \
        --set model.max_positions=128 --out randomized-128.json   # one variation

Each (task, encoding) pair trains in its own process; `--jobs 2` (the default) runs two
at a time, which suits XLA on CPU, where a model this small keeps about one core busy.
Results go to benchmarks/length_generalization.json with the accuracy at every length.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jabcli.positions import SCHEMES  # noqa: E402

TASKS = ("reverse", "copy", "sort")
BINS = ((1, 16), (17, 32), (33, 64))
OUT = Path(__file__).with_name("length_generalization.json")


def study_one(
    task: str,
    encoding: str,
    steps: int,
    samples: int,
    longest: int,
    seed: int,
    seeds: int,
    extra: list[str],
):
    """Train `seeds` models together and evaluate each at every length 1..longest."""
    import jax

    from jabcli.evaluate import evaluate
    from jabcli.experiment import resolve
    from jabcli.training import Trainer

    sets = [
        f"model.pos_encoding={encoding}",
        "task.min_len=1",
        "task.max_len=16",
        f"train.eval_every={steps}",  # evaluate once, at the end
        "train.target_seq_acc=1.0",
        *extra,
    ]
    experiment = resolve(task, sets=sets, steps=steps, seed=seed, seeds=seeds)
    tic = time.perf_counter()
    trainer = Trainer(experiment)
    outcome = trainer.run()
    train_s = time.perf_counter() - tic
    key = jax.random.PRNGKey(1000 + seed)  # the same held-out inputs for every seed
    per_seed = []
    for state in trainer.states():
        result = evaluate(experiment, state.params, key, samples, 1, longest, each_length=True)
        per_length = result["per_length"]
        bins = {}
        for low, high in BINS:
            rows = [per_length[n] for n in range(low, min(high, longest) + 1) if n in per_length]
            if rows:
                bins[f"{low}-{high}"] = sum(r["seq_acc"] for r in rows) / len(rows)
        per_seed.append(
            {
                "bins": bins,
                "per_length": {n: r["seq_acc"] for n, r in per_length.items()},
                "token_acc_per_length": {n: r["token_acc"] for n, r in per_length.items()},
            }
        )
    return {
        "task": task,
        "pos_encoding": encoding,
        "steps": outcome["step"],
        "seeds": trainer.seeds,
        "train_s": train_s,
        "per_seed": per_seed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--encodings", nargs="+", default=list(SCHEMES))
    parser.add_argument("--steps", type=int, default=2000, help="training steps per model")
    parser.add_argument("--samples", type=int, default=100, help="held-out inputs per length")
    parser.add_argument("--longest", type=int, default=64, help="longest input evaluated")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--seeds", type=int, default=3, help="models per task and encoding")
    parser.add_argument("--jobs", type=int, default=2, help="models trained at once")
    parser.add_argument("--quick", action="store_true", help="tiny budget: checks the script")
    parser.add_argument(
        "--set", action="append", default=[], help="a config override for every model"
    )
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--print", type=Path, help="only print the table of a results file")
    args = parser.parse_args()
    if args.print:
        print_table(json.loads(args.print.read_text()))
        return
    if args.quick:
        args.steps, args.samples, args.longest, args.seeds = 100, 10, 24, 2
    jobs = [(t, e) for t in args.tasks for e in args.encodings]
    print(
        f"Training {len(jobs)} groups of {args.seeds} models ({args.steps} steps each, "
        f"{args.jobs} groups at a time), "
        f"then {args.samples} held-out inputs at each length 1-{args.longest}",
        file=sys.stderr,
    )
    tic = time.perf_counter()
    context = multiprocessing.get_context("spawn")  # JAX does not survive fork
    with ProcessPoolExecutor(args.jobs, mp_context=context) as pool:
        futures = [
            pool.submit(
                study_one,
                t,
                e,
                args.steps,
                args.samples,
                args.longest,
                args.seed,
                args.seeds,
                args.set,
            )
            for t, e in jobs
        ]
        results = []
        for future in futures:
            results.append(future.result())
            r = results[-1]
            print(f"  {r['task']:8} {r['pos_encoding']:11} {r['train_s']:6.0f} s", file=sys.stderr)
    report = {
        "command": "python benchmarks/length_generalization.py"
        + (" --quick" if args.quick else ""),
        "machine": f"{platform.processor() or platform.machine()}, "
        f"{multiprocessing.cpu_count()} cores",
        "steps": args.steps,
        "samples_per_length": args.samples,
        "train_lengths": [1, 16],
        "seed": args.seed,
        "seeds": args.seeds,
        "set": args.set,
        "wall_s": time.perf_counter() - tic,
        "results": results,
    }
    args.out.write_text(json.dumps(report, indent=1))
    print_table(report)


def spread(values: list[float], fmt) -> str:
    """median [min-max]"""
    return f"{fmt(statistics.median(values))} [{fmt(min(values))}-{fmt(max(values))}]"


def print_table(report: dict) -> None:
    bins = [f"{low}-{high}" for low, high in BINS]
    extra = f", with {' '.join(report['set'])}" if report.get("set") else ""
    print(
        f"Exact match by input length, median [min-max] over {report['seeds']} seeds; "
        f"trained on 1-16, {report['steps']} steps, "
        f"{report['samples_per_length']} held-out inputs per length{extra}\n"
    )
    print("| task | encoding | " + " | ".join(bins) + " | longest length at ≥ 50% |")
    print("|---|---|" + "---:|" * (len(bins) + 1))
    for r in report["results"]:
        seeds = r["per_seed"]
        cells = [
            spread([one["bins"][b] for one in seeds], lambda x: f"{100 * x:.1f}%")
            if b in seeds[0]["bins"]
            else "-"
            for b in bins
        ]
        longest = [
            max((int(n) for n, acc in one["per_length"].items() if acc >= 0.5), default=0)
            for one in seeds
        ]
        cells.append(spread(longest, lambda x: f"{x:g}"))
        print(f"| {r['task']} | {r['pos_encoding']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
