"""Did it learn the algorithm, or the lengths it saw? A study you can rerun.

Every row trains a task on inputs of length 1-16 with one positional encoding setting,
everything else as in the task's preset, for a fixed number of steps with no early stop,
then measures exact match on fresh held-out inputs at every length up to --longest
(128), both as decoded and with the answer's true length imposed (`jab eval
--force-length`), and reports it over 1-16 (the training range), 17-32, 33-64 and
65-128. Every row trains --seeds models (3 by default) side by side, as
`jab train --seeds` does, and every figure is their median [min-max].

The rows: the grid of reverse, copy and sort with each classic encoding (--tasks,
--encodings, --steps), and EXTRA_ROWS: coupled positions on every task that has an
alignment, index hints on copy and reverse, and sort with no source positions.

    python benchmarks/length_generalization.py                # grid and extra rows
    python benchmarks/length_generalization.py --rows --merge # only the extra rows,
                                                              # merged into the JSON
    python benchmarks/length_generalization.py --rows coupled --merge   # some of them
    python benchmarks/length_generalization.py --quick        # a smoke test of the script

Rows train in processes of their own, `--jobs 2` (the default) at a time, which suits
XLA on CPU, where a model this small keeps about one core busy. Results go to
benchmarks/length_generalization.json, written after every row, with the accuracy at
every length; `--print FILE` prints the table of a results file.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import signal
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


TASKS = ("reverse", "copy", "sort")
GRID_ENCODINGS = ["sinusoidal", "learned", "rope", "alibi", "randomized"]
BINS = ((1, 16), (17, 32), (33, 64), (65, 128))
OUT = Path(__file__).with_name("length_generalization.json")

# The study's rows beyond the encodings x TASKS grid: (row name, task, settings, steps).
# Coupled positions solve in a few hundred steps; addition needs more.
ADDITION_REVERSED = ["task.reverse_answer=true"]
EXTRA_ROWS = [
    (
        "addition (reversed answer) coupled",
        "addition",
        ["model.pos_encoding=coupled", *ADDITION_REVERSED],
        6000,  # the preset's steps, as for the other order
    ),
    ("addition coupled", "addition", ["model.pos_encoding=coupled"], 6000),
    *(
        (f"{task} coupled", task, ["model.pos_encoding=coupled"], 400)
        for task in ("duplicate", "copy", "reverse", "shift", "odds_first")
    ),
    # The paper's reading of coupled positions, against jab's (biases only), same budgets.
    ("reverse coupled_sinusoidal", "reverse", ["model.pos_encoding=coupled_sinusoidal"], 400),
    (
        "addition (reversed answer) coupled_sinusoidal",
        "addition",
        ["model.pos_encoding=coupled_sinusoidal", *ADDITION_REVERSED],
        6000,
    ),
    ("sort none/none", "sort", ["model.pos_encoding=none"], 2000),
    (
        "sort none/randomized",
        "sort",
        ["model.src_pos_encoding=none", "model.tgt_pos_encoding=randomized"],
        2000,
    ),
    # The alignment learned, not given: the model writes each symbol's index hint itself
    # and finds it in the input; `distance` attention keeps that lookup length-blind.
    *(
        (f"{task} index hints", task, ["task.index_hints=true", "model.pos_encoding=distance"], n)
        for task, n in (("copy", 1000), ("reverse", 3000))
    ),
    (  # reverse's seeds split at 3000 steps: one solves every length, one barely any
        "reverse index hints, 5000 steps",
        "reverse",
        ["task.index_hints=true", "model.pos_encoding=distance"],
        5000,
    ),
    (  # sort's best setting, on the task with three symbols and many duplicates
        "bucket_sort none/randomized",
        "bucket_sort",
        ["model.src_pos_encoding=none", "model.tgt_pos_encoding=randomized"],
        2000,
    ),
]


def study_one(
    name: str,
    task: str,
    settings: list[str],
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
    from jabcli.tasks import TASKS
    from jabcli.training import Trainer

    sets = [
        *settings,
        f"task.min_len={TASKS[task].min_length}",  # 1, or 3 for addition (1+2)
        "task.max_len=16",
        f"train.eval_every={steps}",  # evaluate once, at the end
        "train.target_seq_acc=1.0",
        "train.pack=false",  # one example per row, as when the published figures were made
        *extra,
    ]
    experiment = resolve(task, sets=sets, steps=steps, seed=seed, seeds=seeds)
    low = experiment.task.min_length
    longest = min(longest, experiment.longest_input())
    tic = time.perf_counter()
    trainer = Trainer(experiment)
    outcome = trainer.run()
    train_s = time.perf_counter() - tic
    key = jax.random.PRNGKey(1000 + seed)  # the same held-out inputs for every seed
    per_seed = []
    for state in trainer.states():
        result = evaluate(
            experiment,
            state.params,
            key,
            samples,
            low,
            longest,
            each_length=True,
            force_length=True,
        )
        per_length = result["per_length"]
        bins, forced = {}, {}
        for low_end, high in BINS:
            rows = [
                per_length[n] for n in range(low_end, min(high, longest) + 1) if n in per_length
            ]
            if rows:
                bins[f"{low_end}-{high}"] = sum(r["seq_acc"] for r in rows) / len(rows)
                forced[f"{low_end}-{high}"] = sum(r["forced_seq_acc"] for r in rows) / len(rows)
        per_seed.append(
            {
                "bins": bins,
                "forced_bins": forced,
                "per_length": {n: r["seq_acc"] for n, r in per_length.items()},
                "forced_per_length": {n: r["forced_seq_acc"] for n, r in per_length.items()},
                "token_acc_per_length": {n: r["token_acc"] for n, r in per_length.items()},
            }
        )
    return {
        "name": name,
        "task": task,
        "pos_encoding": experiment.config.model.positions,
        "set": settings,
        "steps": outcome["step"],
        "seeds": trainer.seeds,
        "train_s": train_s,
        "eval_s": time.perf_counter() - tic - train_s,
        "longest": longest,
        "per_seed": per_seed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--encodings", nargs="+", default=GRID_ENCODINGS)
    parser.add_argument(
        "--rows",
        nargs="*",
        help="train only the rows whose name contains one of these words "
        "(e.g. coupled); without words, no grid rows and every extra row",
    )
    parser.add_argument("--grid-only", action="store_true", help="leave out the extra rows")
    parser.add_argument("--steps", type=int, default=2000, help="training steps per grid model")
    parser.add_argument("--samples", type=int, default=20, help="held-out inputs per length")
    parser.add_argument("--longest", type=int, default=128, help="longest input evaluated")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--seeds", type=int, default=3, help="models per row")
    parser.add_argument("--jobs", type=int, default=2, help="rows trained at once")
    parser.add_argument("--quick", action="store_true", help="tiny budget: checks the script")
    parser.add_argument(
        "--set", action="append", default=[], help="a config override for every model"
    )
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--merge", action="store_true", help="replace these rows in --out, keep the others"
    )
    parser.add_argument("--print", type=Path, help="only print the table of a results file")
    args = parser.parse_args()
    if args.print:
        print_table(json.loads(args.print.read_text()))
        return
    rows = [
        (f"{t} {e}", t, [f"model.pos_encoding={e}"], args.steps)
        for t in args.tasks
        for e in args.encodings
    ] + ([] if args.grid_only else EXTRA_ROWS)
    if args.rows is not None:
        rows = [r for r in EXTRA_ROWS if not args.rows or any(w in r[0] for w in args.rows)]
    if args.quick:
        args.samples, args.longest, args.seeds = 10, 24, 2
        rows = [(name, task, sets, 100) for name, task, sets, _ in rows]
    print(
        f"Training {len(rows)} rows of {args.seeds} models ({args.jobs} rows at a time), "
        f"then {args.samples} held-out inputs at each length up to {args.longest}",
        file=sys.stderr,
    )
    tic = time.perf_counter()
    report = {
        "command": "python benchmarks/length_generalization.py"
        + (" --quick" if args.quick else ""),
        "machine": f"{platform.processor() or platform.machine()}, "
        f"{multiprocessing.cpu_count()} cores",
        "samples_per_length": args.samples,
        "train_lengths": [1, 16],
        "seed": args.seed,
        "seeds": args.seeds,
        "set": args.set,
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    old = json.loads(args.out.read_text()) if args.merge and args.out.exists() else None
    results = []
    context = multiprocessing.get_context("spawn")  # JAX does not survive fork
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    pool = ProcessPoolExecutor(args.jobs, mp_context=context)
    try:
        futures = [
            pool.submit(
                study_one,
                name,
                task,
                sets,
                steps,
                args.samples,
                args.longest,
                args.seed,
                args.seeds,
                args.set,
            )
            for name, task, sets, steps in rows
        ]
        for future in as_completed(futures):  # saved after every row: nothing is lost
            results.append(future.result())
            r = results[-1]
            print(
                f"  {r['name']:40} {r['train_s']:6.0f} s training, {r['eval_s']:5.0f} s eval",
                file=sys.stderr,
            )
            report["wall_s"] = time.perf_counter() - tic
            write(args.out, report, results, old)
    except BaseException:  # Ctrl-C, SIGTERM or a failed row: no worker trains on unseen
        for worker in multiprocessing.active_children():
            worker.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    print_table(json.loads(args.out.read_text()))


def write(out: Path, report: dict, results: list[dict], old: dict | None) -> None:
    """The report with these results; merged into `old`, replacing rows of the same name."""
    if old is None:
        out.write_text(json.dumps({**report, "results": results}, indent=1))
        return
    names = {r["name"] for r in results}
    kept = [r for r in old["results"] if row_name(r) not in names]
    runs = [run for run in old.get("runs", []) if run.get("started") != report["started"]]
    merged = {**old, "results": kept + results, "runs": runs + [report]}
    out.write_text(json.dumps(merged, indent=1))


def row_name(result: dict) -> str:
    """A result's row name (results from before rows had names: task and encoding)."""
    return result.get("name") or f"{result['task']} {result['pos_encoding']}"


def spread(values: list[float], fmt) -> str:
    """median [min-max]"""
    return f"{fmt(statistics.median(values))} [{fmt(min(values))}-{fmt(max(values))}]"


def percent(x: float) -> str:
    return f"{100 * x:.1f}%"


def print_table(report: dict) -> None:
    """Markdown: exact match per range of lengths, and with the true length imposed."""
    bins = [f"{low}-{high}" for low, high in BINS]
    print(
        f"Exact match by input length, median [min-max] over {report['seeds']} seeds; "
        f"trained on 1-16, {report['samples_per_length']} held-out inputs per length; "
        "after the slash: the median with the answer's true length imposed "
        "(jab eval --force-length)\n"
    )
    print("| row | steps | training s | " + " | ".join(bins) + " | longest length at ≥ 50% |")
    print("|---|---:|---:|" + "---:|" * (len(bins) + 1))
    for r in report["results"]:
        seeds = r["per_seed"]
        cells = []
        for b in bins:
            if b not in seeds[0]["bins"]:
                cells.append("-")
                continue
            cell = spread([one["bins"][b] for one in seeds], percent)
            if "forced_bins" in seeds[0]:
                cell += " / " + percent(statistics.median(one["forced_bins"][b] for one in seeds))
            cells.append(cell)
        longest = [
            max((int(n) for n, acc in one["per_length"].items() if acc >= 0.5), default=0)
            for one in seeds
        ]
        cells.append(spread(longest, lambda x: f"{x:g}"))
        steps = r.get("steps", report.get("steps"))
        print(f"| {row_name(r)} | {steps} | {r['train_s']:.0f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
