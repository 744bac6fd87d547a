"""Benchmarks of jab: train throughput, time to solve, startup and greedy decoding.

Training throughput against eager PyTorch, time to solve each task, CLI startup and time
to the first step, and cached against recomputing greedy decoding:

    python benchmarks/run.py [--quick] [--out benchmarks/results.json]
                             [--sections train,solve,startup,interactive,decode,forms]

Sections (all by default, in this order):

* train   - train steps/s of jab's jitted `train_chunk`, packed (the default) and one
            example per row, and of the eager PyTorch baseline
            (benchmarks/torch_baseline.py) at the "preset" and "reference" shapes, in this
            process; useful (non-padding) tokens/s; model FLOP/s from XLA's cost analysis
            of one step, as a fraction of a large float32 matmul's FLOP/s measured here.
* solve   - time to reach each preset's train.target_seq_acc, seeds 0, 1, 2, one fresh
            process per run with the persistent compilation cache off
            (benchmarks/solve_once.py): the whole process (imports included) and its
            `Trainer(experiment).run()` (compilation included); and the same for reverse
            in eager PyTorch (torch_baseline.solve_reverse: the preset's model,
            initializers and hyperparameters, one example per row).
* startup - `jab --help` wall time, and time to the first train step of the reverse
            preset in a fresh process (benchmarks/first_step.py), cold (empty
            XDG_CACHE_HOME), warm (the same XDG_CACHE_HOME again) and with JAB_NO_CACHE=1.
* interactive - whole-process wall time, warm compilation cache, of `jab predict`,
            `show-attention`, `eval --samples 200`, `tasks`, `--help` and `train --help` on
            a run of the reverse preset's shape; and the XLA compilation seconds of a cold
            `jab train --task reverse --steps 200` (JAX_LOG_COMPILES=1), by program.
* decode-long - evaluation at the lengths research uses: whole-process wall time and peak
            RSS of `jab eval --lengths 41-100|41-200|1-128` (one seed) and 41-500 (a 3-seed
            group), and of `jab compare` of two seeds, on a coupled reverse group of the
            preset's size trained here (warm compilation cache: each command run twice,
            the second counted); then greedy decoding of 16 sources of 200 and 500 symbols
            to full length (<eos> never chosen) by jab (`decode_rows`) and by PyTorch with
            a key/value cache (torch_baseline.greedy_answers_cached), the same
            sinusoidal preset-shape model, tokens/s and achieved GFLOP/s.
* logging - steps/s of `jab train` of the reverse preset (1000 steps, target out of
            reach, in this process) without logging, with train.log_to=tensorboard and
            with train.log_to=wandb (WANDB_MODE=offline), three rounds in turn, medians.
* decode  - greedy decoding of 1024 sources to 64 output tokens with a reference-shape
            model: `greedy_decode` (key/value cache) against `greedy_decode_full`
            (recompute), with the <eos> logit pushed down so no row stops early.
* forms   - train steps/s of each model form (model.arch: encoder_decoder, decoder,
            encoder) at the "preset" shape (same width and depth), packed where the form
            packs and one example per row, measured as the train section measures jab.

--quick shrinks every section to smoke-test sizes (one seed, 100-step cap, a smaller
decode batch); its figures check that the script works, not the targets. Tables go to
the terminal; every figure goes to --out as JSON, rewritten after each section, and a
last table checks each target of the issue.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from rich.console import Console
from rich.table import Table

from jabcli.core.tokenizer import EOS_ID, Tokenizer
from jabcli.evaluation.decode import greedy_decode, greedy_decode_full
from jabcli.experiment.experiment import Experiment
from jabcli.experiment.resolve import resolve
from jabcli.tasks import derived
from jabcli.training.training import Schedule, Trainer, init, update

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # for torch_baseline, however this file is started

SECTIONS = (
    "train", "solve", "startup", "interactive", "decode", "decode-long", "logging", "forms"
)  # fmt: skip
FORMS = ("encoder_decoder", "decoder", "encoder")  # model.arch, the default first
PRESETS = ("copy", "reverse", "sort")
VOCAB_SIZE = len(Tokenizer())

TRAIN_SHAPES: dict[str, dict[str, int]] = {
    "preset": {"d_model": 64, "num_heads": 4, "d_ff": 256, "num_layers": 2,
               "batch_size": 64, "min_len": 1, "max_len": 16},
    "reference": {"d_model": 128, "num_heads": 4, "d_ff": 512, "num_layers": 2,
                  "batch_size": 128, "min_len": 1, "max_len": 16},
}  # fmt: skip
TRAIN_DROPOUT = 0.0  # the presets' default, in jab and in the baseline alike
MODEL_KEYS = ("d_model", "num_heads", "d_ff", "num_layers")
REFERENCE_MODEL = {k: TRAIN_SHAPES["reference"][k] for k in MODEL_KEYS}

console = Console()
if not console.is_terminal:
    console.width = max(console.width, 110)  # rich assumes 80 columns when piped


@dataclass(frozen=True)
class Sizes:
    """How much each section measures: the full run, or --quick smoke-test sizes."""

    chunk: int = 25  # train steps per timed `train_chunk` call (train.log_every)
    train_repeats: int = 3
    torch_steps: int = 25
    torch_warmup: int = 5
    torch_repeats: int = 3
    peak_size: int = 2048
    peak_repeats: int = 7
    solve_seeds: tuple[int, ...] = (0, 1, 2)
    solve_steps: int | None = None  # None: the preset's train.steps
    help_repeats: int = 5
    first_step_repeats: int = 3
    interactive_repeats: int = 3
    decode_batch: int = 1024
    decode_len: int = 64
    decode_repeats: int = 1  # one full-recompute pass takes minutes
    logging_steps: int = 1000
    logging_rounds: int = 3
    long_steps: int = 600  # training of decode-long's coupled reverse group
    long_quick: bool = False  # shorter ranges


QUICK = Sizes(
    chunk=5,
    train_repeats=2,
    torch_steps=5,
    torch_warmup=2,
    torch_repeats=2,
    peak_repeats=3,
    solve_seeds=(0,),
    solve_steps=100,
    help_repeats=3,
    first_step_repeats=1,
    interactive_repeats=1,
    decode_batch=128,
    decode_len=32,
    decode_repeats=1,
    logging_steps=100,
    logging_rounds=1,
    long_steps=100,
    long_quick=True,
)


# ---------------------------------------------------------------- small helpers


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds to run `fn` and wait for its arrays, and its result."""
    tic = time.perf_counter()
    result = jax.block_until_ready(fn())
    return time.perf_counter() - tic, result


def fmt(value: float | None, spec: str = ".3g", suffix: str = "") -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "-"
    return f"{value:{spec}}{suffix}"


def table(title: str, columns: list[str], rows: list[list[str]]) -> Table:
    out = Table(title=title, title_justify="left")
    for i, column in enumerate(columns):
        out.add_column(column, justify="left" if i == 0 else "right")
    for row in rows:
        out.add_row(*row)
    return out


def note(text: str) -> None:
    console.print(f"[dim]{text}[/dim]")


def run_json_child(args: list[str], env: dict[str, str] | None = None) -> tuple[float, dict]:
    """Run a helper script; (parent wall seconds until its JSON line, that JSON or an error)."""
    with tempfile.TemporaryFile("w+") as stderr:
        tic = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, *args], stdout=subprocess.PIPE, stderr=stderr, text=True, env=env
        )
        line = proc.stdout.readline()
        while line and not line.startswith("{"):  # skip anything printed before the result
            line = proc.stdout.readline()
        wall = time.perf_counter() - tic
        proc.communicate()
        if proc.returncode != 0 or not line.strip():
            stderr.seek(0)
            return wall, {"error": f"exit {proc.returncode}: {stderr.read()[-2000:]}"}
    return wall, json.loads(line)


def machine_info() -> dict:
    return {
        "time": datetime.datetime.now().isoformat(timespec="seconds"),
        "argv": sys.argv,
        "platform": platform.platform(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "load_average_at_start": os.getloadavg(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "devices": [str(d) for d in jax.devices()],
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "persistent_cache_in_this_process": jax.config.jax_compilation_cache_dir,
    }


# ---------------------------------------------------------------- train


def train_experiment(
    shape: dict[str, int],
    log_every: int,
    dropout: float,
    pack: bool = True,
    arch: str = "encoder_decoder",
) -> Experiment:
    sets = [f"model.{k}={shape[k]}" for k in MODEL_KEYS]
    sets += [
        f"model.arch={arch}",
        f"train.batch_size={shape['batch_size']}",
        f"task.min_len={shape['min_len']}",
        f"task.max_len={shape['max_len']}",
        "task.alphabet=0123456789",
        f"train.log_every={log_every}",
        f"model.dropout={dropout}",
        f"train.pack={str(pack).lower()}",
    ]
    return resolve("reverse", sets=sets)


def matmul_peak(size: int, repeats: int) -> dict:
    """FLOP/s of a float32 [size, size] @ [size, size] jnp.dot, the fastest of `repeats`."""
    a = jax.random.normal(jax.random.PRNGKey(0), (size, size), jnp.float32)
    b = jax.random.normal(jax.random.PRNGKey(1), (size, size), jnp.float32)
    dot = jax.jit(jnp.dot)
    timed(lambda: dot(a, b))
    seconds = [timed(lambda: dot(a, b))[0] for _ in range(repeats)]
    # The fastest: a peak is the best the machine does (on a shared machine the median
    # of 7 varied from 93 to 174 GFLOP/s between runs).
    return {"size": size, "seconds_all": seconds, "flops_per_s": 2 * size**3 / min(seconds)}


def step_flops(experiment: Experiment, state) -> float:
    """XLA's FLOP count of one jitted `train.update` (the cost analysis may be a list)."""
    schedule = Schedule.of(experiment.config.train)
    program = jax.jit(lambda s: update(experiment, s, schedule))
    analysis = program.lower(state).compile().cost_analysis()
    if isinstance(analysis, (list, tuple)):
        analysis = analysis[0] if analysis else {}
    return float((analysis or {}).get("flops", float("nan")))


def useful_tokens(shape: dict[str, int]) -> float:
    """Real (non-padding) tokens per step of reverse at `shape`, on average: each example's
    source + <eos> and answer + <eos>, whether packed or not."""
    lengths = range(shape["min_len"], shape["max_len"] + 1)
    return shape["batch_size"] * sum(2 * (n + 1) for n in lengths) / len(lengths)


def jab_train(
    shape: dict[str, int],
    sizes: Sizes,
    dropout: float,
    peak: float,
    pack: bool = True,
    arch: str = "encoder_decoder",
) -> dict:
    """Steps/s of the jitted train_chunk after a warm-up call, median of the repeats."""
    experiment = train_experiment(shape, sizes.chunk, dropout, pack, arch)
    trainer = Trainer(experiment)  # the jitted, donated, sharded chunk that `jab train` runs
    state, chunk = trainer.state, trainer.chunk
    flops = step_flops(experiment, init(experiment, 0))
    num_steps = jnp.asarray(sizes.chunk, jnp.int32)
    compile_s, (state, _) = timed(lambda: chunk(state, num_steps))
    rates = []
    for _ in range(sizes.train_repeats):
        seconds, (state, _) = timed(lambda state=state: chunk(state, num_steps))
        rates.append(sizes.chunk / seconds)
    steps_per_s = median(rates)
    src_len, tgt_len = derived.widths(experiment.task, shape["max_len"])
    flops_per_s = flops * steps_per_s
    return {
        "packed": experiment.packs,
        "useful_tokens_per_s": steps_per_s * useful_tokens(shape),
        "steps_per_s": steps_per_s,
        "steps_per_s_all": rates,
        "steps_per_call": sizes.chunk,
        "first_call_s": compile_s,
        "src_len": src_len,
        "tgt_len": tgt_len,
        "flops_per_step": flops,
        "flops_per_s": flops_per_s,
        "fraction_of_matmul_peak": flops_per_s / peak,
        "dropout": dropout,
        "params": int(sum(x.size for x in jax.tree_util.tree_leaves(state.params))),
    }


def torch_train(shape: dict[str, int], sizes: Sizes, compiled: bool = False) -> dict:
    """The PyTorch baseline at the same shape, eager or through `torch.compile`, in a
    process of its own (so that no JAX thread pool shares the CPU with it), or why it was
    skipped."""
    kwargs = {
        **shape,
        "src_len": shape["max_len"] + 1,
        "tgt_len": shape["max_len"] + 1,
        "vocab_size": VOCAB_SIZE,
        "steps": sizes.torch_steps,
        "warmup": sizes.torch_warmup,
        "repeats": sizes.torch_repeats,
        "dropout": TRAIN_DROPOUT,
        "compiled": compiled,
    }
    code = (
        f"import json, sys; sys.path.insert(0, {str(HERE)!r}); import torch_baseline; "
        f"print(json.dumps(torch_baseline.measure_train_steps_per_sec(**{kwargs!r})))"
    )
    _, result = run_json_child(["-c", code])
    if "error" in result:
        return {"skipped": f"PyTorch baseline failed: {result['error'].splitlines()[-1]}"}
    return result


def bench_train(sizes: Sizes) -> dict:
    note(f"train: matmul peak ({sizes.peak_size}x{sizes.peak_size} float32)")
    peak = matmul_peak(sizes.peak_size, sizes.peak_repeats)
    shapes = {}
    for name, shape in TRAIN_SHAPES.items():
        runs = {}
        for pack in (True, False):
            note(f"train: jab, {name} shape, {'packed' if pack else 'one example per row'}")
            runs["packed" if pack else "unpacked"] = jab_train(
                shape, sizes, TRAIN_DROPOUT, peak["flops_per_s"], pack
            )
        note(f"train: PyTorch eager, {name} shape")
        torch = torch_train(shape, sizes)
        note(f"train: PyTorch with torch.compile, {name} shape")
        compiled = torch_train(shape, sizes, compiled=True)
        for baseline in (torch, compiled):
            if "skipped" in baseline:
                console.print(f"[yellow]{baseline['skipped']}; the baseline is skipped[/yellow]")
            else:
                steps = baseline["steps_per_sec_median"]
                baseline["useful_tokens_per_s"] = steps * useful_tokens(shape)

        def over(baseline: dict, runs: dict = runs) -> dict:
            return {
                kind: None
                if "skipped" in baseline
                else r["steps_per_s"] / baseline["steps_per_sec_median"]
                for kind, r in runs.items()
            }

        shapes[name] = {
            "shape": shape,
            "jab": runs,
            "torch": torch,
            "torch_compiled": compiled,
            "jab_over_torch": over(torch),
            "jab_over_torch_compiled": over(compiled),
        }
    print_train(peak, shapes)
    return {"matmul_peak": peak, "shapes": shapes}


def print_train(peak: dict, shapes: dict) -> None:
    rows = []
    for name, r in shapes.items():
        for kind, jab in r["jab"].items():
            rows.append(
                [
                    f"{name}, {kind}",
                    fmt(jab["steps_per_s"], ".1f"),
                    fmt(jab["useful_tokens_per_s"], ",.0f"),
                    fmt(jab["flops_per_step"] / 1e9, ".2f"),
                    fmt(100 * jab["fraction_of_matmul_peak"], ".1f", "%"),
                    fmt(r["torch"].get("steps_per_sec_median"), ".1f"),
                    fmt(r["jab_over_torch"][kind], ".2f", "x"),
                    fmt(r["torch_compiled"].get("steps_per_sec_median"), ".1f"),
                    fmt(r["jab_over_torch_compiled"][kind], ".2f", "x"),
                ]
            )
    console.print(
        table(
            "train",
            [
                "shape",
                "jab step/s",
                "useful tok/s",
                "GFLOP/step",
                "% peak",
                "torch eager step/s",
                "jab/eager",
                "torch.compile step/s",
                "jab/compiled",
            ],
            rows,
        )
    )
    note(
        f"reverse task, dropout {TRAIN_DROPOUT} in both; matmul peak"
        f" {peak['flops_per_s'] / 1e9:.1f} GFLOP/s; a step is batch_size examples in every"
        " column; useful tok/s counts source and answer tokens with their <eos>, not padding;"
        " GFLOP/step from XLA's cost analysis of one jitted train.update"
    )


# ---------------------------------------------------------------- solve


def solve_runs(args_of_seed: Callable[[int], list[str]], sizes: Sizes) -> dict:
    """Fresh-process time-to-solve runs, one per seed, and their medians."""
    runs = []
    for seed in sizes.solve_seeds:
        process_s, result = run_json_child(args_of_seed(seed))
        runs.append({**result, "process_s": process_s})
    return {
        "median_wall_s": median([r["wall_s"] for r in runs if "wall_s" in r]),
        "median_process_s": median([r["process_s"] for r in runs if "wall_s" in r]),
        "all_reached": all("error" not in r and r["reached"] for r in runs),
        "runs": runs,
    }


def bench_solve(sizes: Sizes) -> dict:
    out = {}
    for task in PRESETS:
        note(f"solve: {task}, seeds {', '.join(map(str, sizes.solve_seeds))}")
        cap = [] if sizes.solve_steps is None else ["--steps", str(sizes.solve_steps)]
        out[task] = solve_runs(
            lambda seed, task=task, cap=cap: [
                str(HERE / "solve_once.py"),
                "--task",
                task,
                "--seed",
                str(seed),
                *cap,
            ],
            sizes,
        )
    note("solve: reverse in eager PyTorch, the same model and hyperparameters")
    steps = "" if sizes.solve_steps is None else f", steps={sizes.solve_steps}"
    out["reverse (PyTorch)"] = solve_runs(
        lambda seed: [
            "-c",
            f"import json, sys; sys.path.insert(0, {str(HERE)!r}); import torch_baseline; "
            f"print(json.dumps(torch_baseline.solve_reverse(seed={seed}{steps})))",
        ],
        sizes,
    )
    print_solve(out)
    return out


def print_solve(out: dict) -> None:
    rows = []
    for task, r in out.items():
        runs = r["runs"]
        rows.append(
            [
                task,
                fmt(r["median_process_s"], ".1f", " s"),
                ", ".join(fmt(x.get("process_s"), ".1f") for x in runs),
                fmt(r["median_wall_s"], ".1f", " s"),
                ", ".join(str(x.get("steps", "error")) for x in runs),
                ", ".join(fmt(x.get("seq_acc"), ".3f") for x in runs),
                "yes" if r["all_reached"] else "no",
            ]
        )
    columns = ["task", "process", "each seed (s)", "training", "steps", "seq_acc", "reached"]
    console.print(table("solve", columns, rows))
    note(
        "process: a fresh process's wall time until it reports, imports included; training:"
        " Trainer(experiment).run() (or the PyTorch loop) to the preset's target_seq_acc,"
        " compilation included; no persistent compilation cache"
    )


# ---------------------------------------------------------------- startup


def jab_executable() -> str:
    beside = Path(sys.executable).with_name("jab")
    return str(beside) if beside.exists() else "jab"


def time_help(repeats: int) -> dict:
    """Wall time of `jab --help` in a subprocess, after one untimed run."""
    command = [jab_executable(), "--help"]
    subprocess.run(command, capture_output=True, check=True)
    seconds = []
    for _ in range(repeats):
        tic = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True)
        seconds.append(time.perf_counter() - tic)
    return {"median_s": median(seconds), "all_s": seconds}


def first_step_env(cache_home: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "JAB_NO_CACHE"}
    if cache_home is None:
        env["JAB_NO_CACHE"] = "1"
    else:
        env["XDG_CACHE_HOME"] = cache_home
    return env


def time_first_steps(repeats: int) -> dict[str, list[dict]]:
    """Cold (empty cache dir), warm (same dir again) and no-cache first steps, `repeats` each."""
    script = [str(HERE / "first_step.py")]
    runs: dict[str, list[dict]] = {"cold": [], "warm": [], "no_cache": []}
    for i in range(repeats):
        with tempfile.TemporaryDirectory(prefix="jab-bench-cache-") as cache_home:
            for kind in ("cold", "warm"):
                note(f"startup: first step, {kind} cache ({i + 1}/{repeats})")
                wall, child = run_json_child(script, first_step_env(cache_home))
                runs[kind].append({"process_s": wall, **child})
        note(f"startup: first step, JAB_NO_CACHE=1 ({i + 1}/{repeats})")
        wall, child = run_json_child(script, first_step_env(None))
        runs["no_cache"].append({"process_s": wall, **child})
    return runs


def bench_startup(sizes: Sizes) -> dict:
    note("startup: jab --help")
    help_ = time_help(sizes.help_repeats)
    runs = time_first_steps(sizes.first_step_repeats)
    first = {
        kind: {
            "median_process_s": median([r["process_s"] for r in rs if "error" not in r]),
            "median_in_script_s": median(
                [r["since_script_start_s"] for r in rs if "error" not in r]
            ),
            "runs": rs,
        }
        for kind, rs in runs.items()
    }
    rows = [["jab --help", fmt(help_["median_s"], ".3f", " s"), "-", "-", "-"]]
    for kind, r in first.items():
        ok = [x for x in r["runs"] if "error" not in x]
        rows.append(
            [
                f"first step, {kind.replace('_', ' ')}",
                fmt(r["median_process_s"], ".2f", " s"),
                fmt(r["median_in_script_s"], ".2f", " s"),
                fmt(median([x["import_s"] for x in ok]), ".2f", " s"),
                fmt(median([x["first_step_s"] + x["init_s"] for x in ok]), ".2f", " s"),
            ]
        )
    console.print(
        table("startup", ["what", "process wall", "in script", "imports", "init + step"], rows)
    )
    note(
        "first step: reverse preset, one step of the jitted train_chunk in a fresh process;"
        " process wall: from spawning the interpreter until the child reports it;"
        " in script: from the helper's first line"
    )
    return {"help": help_, "first_step": first}


# ---------------------------------------------------------------- interactive

INTERACTIVE = {
    "jab predict 12345": ["predict", "12345", "--run", "runs/r"],
    "jab show-attention --input 123456": ["show-attention", "--input", "123456", "--run", "runs/r"],
    "jab eval --samples 200": ["eval", "--samples", "200", "--run", "runs/r"],
    "jab tasks": ["tasks"],
    "jab --help": ["--help"],
    "jab train --help": ["train", "--help"],
}


def compile_seconds(stderr: str) -> dict[str, float]:
    """XLA compilation seconds by program, from JAX_LOG_COMPILES=1 output."""
    seconds: dict[str, float] = {}
    for name, value in re.findall(r"Finished XLA compilation of (\S+) in ([0-9.]+) sec", stderr):
        seconds[name] = seconds.get(name, 0.0) + float(value)
    return seconds


def bench_interactive(sizes: Sizes) -> dict:
    """Whole-process wall time of the commands a user waits on, warm compilation cache,
    on a run of the reverse preset's shape; and the XLA compilation of a cold `jab train`."""
    out: dict[str, Any] = {"commands": {}}
    with tempfile.TemporaryDirectory(prefix="jab-bench-") as work:
        env = {**os.environ, "XDG_CACHE_HOME": str(Path(work) / "cache"), "JAX_LOG_COMPILES": "1"}
        env.pop("JAB_NO_CACHE", None)
        note("interactive: a cold jab train --task reverse --steps 200 (empty cache)")
        train = [jab_executable(), "train", "--task", "reverse", "--steps", "200", "--out"]
        tic = time.perf_counter()
        done = subprocess.run(
            [*train, "runs/r"], cwd=work, env=env, capture_output=True, text=True, check=True
        )
        compiled = compile_seconds(done.stderr)
        out["cold_train"] = {
            "process_s": time.perf_counter() - tic,
            "compile_s": sum(compiled.values()),
            "compile_by_program_s": dict(sorted(compiled.items(), key=lambda kv: -kv[1])),
        }
        env.pop("JAX_LOG_COMPILES")
        for label, args in INTERACTIVE.items():
            note(f"interactive: {label}")
            command = [jab_executable(), *args]
            subprocess.run(command, cwd=work, env=env, capture_output=True, check=True)  # warm
            seconds = []
            for _ in range(sizes.interactive_repeats):
                tic = time.perf_counter()
                subprocess.run(command, cwd=work, env=env, capture_output=True, check=True)
                seconds.append(time.perf_counter() - tic)
            out["commands"][label] = {"median_s": median(seconds), "all_s": seconds}
    rows = [
        [label, fmt(r["median_s"], ".2f", " s"), ", ".join(fmt(x, ".2f") for x in r["all_s"])]
        for label, r in out["commands"].items()
    ]
    console.print(table("interactive (warm cache)", ["command", "median", "each (s)"], rows))
    cold = out["cold_train"]
    top = ", ".join(f"{k} {v:.1f} s" for k, v in list(cold["compile_by_program_s"].items())[:3])
    note(
        f"a cold jab train --task reverse --steps 200: {cold['process_s']:.1f} s in all, "
        f"{cold['compile_s']:.1f} s of XLA compilation ({top}, ...)"
    )
    return out


# ---------------------------------------------------------------- decode


def never_eos(params: dict) -> dict:
    """The same parameters with the <eos> output bias at -1e9, so decoding runs full length."""
    params = {name: dict(leaves) for name, leaves in params.items()}
    (name,) = [n for n in params if n.endswith("to_logits")]
    params[name]["b"] = params[name]["b"].at[EOS_ID].set(-1e9)
    return params


def decode_steps(out: np.ndarray) -> int:
    """Loop iterations greedy decoding ran: until the last row's first <eos>, else all."""
    has_eos = (out == EOS_ID).any(axis=1)
    ends = np.where(has_eos, (out == EOS_ID).argmax(axis=1) + 1, out.shape[1])
    return int(ends.max())


def time_decoder(decoder, experiment: Experiment, params, src, max_out: int, repeats: int) -> dict:
    tic = time.perf_counter()
    positions = experiment.positions(jax.random.PRNGKey(0), src, max_out)
    compiled = decoder.lower(experiment.model, params, src, max_out, *positions).compile()
    compile_s = time.perf_counter() - tic
    runs = [timed(lambda: compiled(params, src, *positions)) for _ in range(repeats)]
    output = np.asarray(runs[-1][1])
    seconds = [s for s, _ in runs]
    return {
        "compile_s": compile_s,
        "median_s": median(seconds),
        "all_s": seconds,
        "decode_steps": decode_steps(output),
        "output": output,
    }


def bench_decode(sizes: Sizes) -> dict:
    max_out, batch = sizes.decode_len, sizes.decode_batch
    src_len = max_out - 1  # reverse: max_out = source length + <eos>
    sets = [f"model.{k}={v}" for k, v in REFERENCE_MODEL.items()]
    sets += [f"task.min_len={src_len}", f"task.max_len={src_len}"]
    experiment = resolve("reverse", sets=sets)
    params = never_eos(init(experiment, 0).params)
    src = experiment.sample(jax.random.PRNGKey(1), batch).src
    results = {}
    for name, decoder in (("incremental", greedy_decode), ("full", greedy_decode_full)):
        note(f"decode: {name} ({batch} x {max_out}, compiling then {sizes.decode_repeats} run(s))")
        results[name] = time_decoder(
            decoder, experiment, params, src, max_out, sizes.decode_repeats
        )
    identical = bool(
        np.array_equal(results["incremental"].pop("output"), results["full"].pop("output"))
    )
    out = {
        "batch": batch,
        "src_len": src.shape[1],
        "max_out": max_out,
        **results,
        "speedup": results["full"]["median_s"] / results["incremental"]["median_s"],
        "identical": identical,
        "params": "random init, <eos> bias -1e9",
    }
    rows = [
        [
            name,
            fmt(r["median_s"], ".3f", " s"),
            fmt(r["compile_s"], ".1f", " s"),
            str(r["decode_steps"]),
        ]
        for name, r in results.items()
    ]
    console.print(table("decode", ["decoder", "median", "compile", "steps run"], rows))
    note(
        f"{batch} sources of {src.shape[1]} ids decoded to {max_out} tokens, reference-shape"
        f" model, random init with <eos> never chosen; speedup {out['speedup']:.1f}x,"
        f" outputs identical: {identical}"
    )
    return out


# ---------------------------------------------------------------- forms


def bench_forms(sizes: Sizes) -> dict:
    """Train steps/s of every model form at the preset shape, against the encoder-decoder
    (issue 40: the decoder-only form within 1.5x of it)."""
    shape = TRAIN_SHAPES["preset"]
    peak = matmul_peak(sizes.peak_size, sizes.peak_repeats)["flops_per_s"]
    out: dict[str, dict] = {}
    for arch in FORMS:
        out[arch] = {}
        for pack in (True, False):
            kind = "packed" if pack else "unpacked"
            note(f"forms: {arch}, {kind}")
            out[arch][kind] = jab_train(shape, sizes, TRAIN_DROPOUT, peak, pack, arch)
    rows = []
    for arch, runs in out.items():
        for kind, r in runs.items():
            base = out[FORMS[0]][kind]["steps_per_s"]
            r["over_encoder_decoder"] = r["steps_per_s"] / base
            rows.append(
                [arch, "packed" if r["packed"] else "one example a row"
                 + ("" if kind == "unpacked" else " (the form does not pack)"),
                 fmt(r["steps_per_s"], ".1f"), f"{r['over_encoder_decoder']:.2f}x",
                 fmt(r["flops_per_step"] / 1e9, ".3f"), f"{r['params']:,}"]
            )  # fmt: skip
    console.print(
        table(
            "model forms, preset shape",
            ["model.arch", "rows", "steps/s", "/ encoder_decoder", "GFLOP/step", "params"],
            rows,
        )
    )
    note(
        f"reverse at the preset shape ({shape}), {sizes.chunk} steps per timed call, "
        f"median of {sizes.train_repeats}"
    )
    return out


# ---------------------------------------------------------------- summary


def dig(results: dict, *keys: str) -> Any:
    for key in keys:
        if not isinstance(results, dict) or key not in results:
            return None
        results = results[key]
    return results


def at_least(value: float | None, limit: float) -> bool | None:
    return None if value is None or np.isnan(value) else value >= limit


def at_most(value: float | None, limit: float) -> bool | None:
    return None if value is None or np.isnan(value) else value <= limit


def summary_rows(results: dict, sizes: Sizes) -> list[dict]:
    """One row per target of the issue: what it asks, what was measured, whether it is met."""
    rows = []

    def add(target: str, measured: str, met: bool | None) -> None:
        rows.append({"target": target, "measured": measured, "met": met})

    if "train" in results:
        for name in TRAIN_SHAPES:
            ratio = dig(results, "train", "shapes", name, "jab_over_torch", "packed")
            add(
                f"{name} shape: jab >= 2x PyTorch eager", fmt(ratio, ".2f", "x"), at_least(ratio, 2)
            )
            ratio = dig(results, "train", "shapes", name, "jab_over_torch_compiled", "packed")
            add(f"{name} shape: jab beside torch.compile", fmt(ratio, ".2f", "x"), None)
        share = dig(
            results, "train", "shapes", "reference", "jab", "packed", "fraction_of_matmul_peak"
        )
        add("reference shape: >= 70% of the matmul peak", fmt(share, ".0%"), at_least(share, 0.7))
    if "solve" in results:
        for task, limit in (("copy", 20), ("reverse", 40), ("sort", 50)):
            r = results["solve"][task]
            seconds = r["median_process_s"]
            measured, met = fmt(seconds, ".1f", " s"), at_most(seconds, limit)
            if not r["all_reached"] and sizes.solve_steps is not None:
                measured += f" (target not reached, capped at {sizes.solve_steps} steps)"
                met = None
            elif not r["all_reached"]:
                measured += " (target not reached by every seed)"
                met = False
            add(f"{task} solved in <= {limit} s (median of seeds, process)", measured, met)
        jab, torch = (results["solve"][k] for k in ("reverse", "reverse (PyTorch)"))
        both = jab["all_reached"] and torch["all_reached"]
        add(
            "reverse solved faster than in PyTorch",
            f"{fmt(jab['median_process_s'], '.1f', ' s')} against "
            f"{fmt(torch['median_process_s'], '.1f', ' s')}"
            + ("" if both else " (not every seed reached the target)"),
            jab["median_process_s"] < torch["median_process_s"] if both else None,
        )
    if "startup" in results:
        seconds = dig(results, "startup", "help", "median_s")
        add("jab --help <= 0.3 s", fmt(seconds, ".3f", " s"), at_most(seconds, 0.3))
        seconds = dig(results, "startup", "first_step", "warm", "median_process_s")
        add(
            "warm first step <= 1 s (process wall)",
            fmt(seconds, ".2f", " s"),
            at_most(seconds, 1.0),
        )
    if "interactive" in results:
        commands = results["interactive"]["commands"]
        for label, limit in (
            ("jab predict 12345", 1.0),
            ("jab show-attention --input 123456", 1.0),
            ("jab eval --samples 200", 1.0),
            ("jab tasks", 0.3),
            ("jab --help", 0.3),
            ("jab train --help", 0.3),
        ):
            seconds = commands[label]["median_s"]
            add(f"{label} <= {limit} s", fmt(seconds, ".2f", " s"), at_most(seconds, limit))
        seconds = results["interactive"]["cold_train"]["compile_s"]
        target = "cold jab train: XLA compilation <= 3 s"
        add(target, fmt(seconds, ".1f", " s"), at_most(seconds, 3.0))
    if "forms" in results:
        for kind in ("packed", "unpacked"):
            ratio = dig(results, "forms", "decoder", kind, "over_encoder_decoder")
            add(
                f"decoder-only {kind} steps/s within 1.5x of the encoder-decoder's",
                fmt(ratio, ".2f", "x"),
                at_least(ratio, 1 / 1.5),
            )
    if "decode" in results:
        r = results["decode"]
        add(
            "incremental decode >= 5x full, identical",
            f"{r['speedup']:.1f}x, identical: {r['identical']}",
            r["speedup"] >= 5 and r["identical"],
        )
    return rows


def print_summary(rows: list[dict], quick: bool) -> None:
    mark = {True: "[green]met[/green]", False: "[red]not met[/red]", None: "[yellow]n/a[/yellow]"}
    console.print(
        table(
            "targets",
            ["target", "measured", "status"],
            [[r["target"], r["measured"], mark[r["met"]]] for r in rows],
        )
    )
    if quick:
        console.print(
            "[yellow]--quick: smoke-test sizes; these figures are not the real measurement[/yellow]"
        )


# ---------------------------------------------------------------- main


# ---------------------------------------------------------------- decode-long


def process(args: list[str]) -> dict:
    """Wall time, peak RSS and exit status of one `jab ARGS` process."""
    tic = time.perf_counter()
    proc = subprocess.Popen(
        [jab_executable(), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - tic
    error = proc.stderr.read().decode().strip()[-300:]
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    return {"wall_s": wall, "peak_rss_gb": usage.ru_maxrss / 2**20, "code": code, "error": error}


def decode_flops(shape: dict[str, int], src_width: int, out_width: int) -> float:
    """Model FLOPs of decoding one token with a cache `out_width` wide over a source
    `src_width` wide (2 per multiply-add; attention over the whole cache, as computed)."""
    d, ff = shape["d_model"], shape["d_ff"]
    per_layer = 6 * d * d + 2 * d * ff + 2 * (src_width + out_width) * d
    return 2.0 * (shape["num_layers"] * per_layer + d * VOCAB_SIZE)


def bench_decode_long(sizes: Sizes) -> dict:
    import torch
    import torch_baseline as tb

    out: dict[str, Any] = {"evals": {}}
    ranges = (
        ("41-60", "41-80", "1-32", "41-100")
        if sizes.long_quick
        else ("41-100", "41-200", "1-128", "41-500")
    )
    with tempfile.TemporaryDirectory() as tmp:
        group = str(Path(tmp) / "reverse-coupled")
        note(f"decode-long: training a 3-seed coupled reverse group, {sizes.long_steps} steps")
        trained = process([
            "train", "--task", "reverse", "--seeds", "3", "--steps", str(sizes.long_steps),
            "--set", "model.pos_encoding=coupled", "--set", "model.max_positions=1024",
            "--set", "train.target_seq_acc=1.0", "--out", group,
        ])  # fmt: skip
        assert trained["code"] == 0, trained["error"]
        seed = f"{group}/seed-0"
        cases = {
            f"eval --lengths {ranges[0]} --samples 4 (one seed)":
                ["eval", "--run", seed, "--lengths", ranges[0], "--samples", "4"],
            f"eval --lengths {ranges[1]} --samples 4 (one seed)":
                ["eval", "--run", seed, "--lengths", ranges[1], "--samples", "4"],
            f"eval --lengths {ranges[2]} --samples 20 (one seed)":
                ["eval", "--run", seed, "--lengths", ranges[2], "--samples", "20"],
            f"eval --lengths {ranges[3]} --samples 4 (3-seed group)":
                ["eval", "--run", group, "--lengths", ranges[3], "--samples", "4"],
            "compare two seeds at the default lengths":
                ["compare", seed, f"{group}/seed-1"],
        }  # fmt: skip
        for name, args in cases.items():
            note(f"decode-long: jab {' '.join(args[:1] + args[3:])}")
            first = process(args)
            out["evals"][name] = {"first": first, "warm": process(args)}
    rows = [
        [name, fmt(r["warm"]["wall_s"], ".1f", " s"), fmt(r["warm"]["peak_rss_gb"], ".2f", " GB"),
         fmt(r["first"]["wall_s"], ".1f", " s"), "ok" if r["warm"]["code"] == 0 else "FAILED"]
        for name, r in out["evals"].items()
    ]  # fmt: skip
    columns = ["jab", "wall", "peak RSS", "first run", "exit"]
    console.print(table("decode-long: whole processes", columns, rows))

    shape = TRAIN_SHAPES["preset"]
    experiment = resolve("reverse", sets=[
        *(f"model.{k}={shape[k]}" for k in MODEL_KEYS), "model.max_positions=1024",
        "task.max_len=500",
    ])  # fmt: skip
    params = never_eos(init(experiment, 0).params)
    torch.manual_seed(0)
    model = tb.Transformer(tb.ModelConfig(**{k: shape[k] for k in MODEL_KEYS},
                                          vocab_size=VOCAB_SIZE, dropout=0.0,
                                          max_positions=1024))  # fmt: skip
    model.init_as_jab()
    model.eval()
    with torch.no_grad():
        model.lm_head.bias[EOS_ID] = -1e9
    from jabcli.evaluation.decode import decode_rows, width_for

    def throughput(length: int, rows: int = 16) -> dict:
        src = np.asarray(experiment.sample(jax.random.PRNGKey(length), rows, length, length).src)
        max_out = derived.answer_width_for(experiment.task, src.shape[1])
        key = jax.random.PRNGKey(0)
        decode_rows(experiment, params, key, src, max_out)  # compiles
        jab_s, _ = timed(lambda: decode_rows(experiment, params, key, src, max_out))
        torch_src = torch.tensor(src, dtype=torch.long)
        tb.greedy_answers_cached(model, torch_src, max_out)  # warm-up
        torch_s, _ = timed(lambda: tb.greedy_answers_cached(model, torch_src, max_out))
        tokens = rows * max_out
        width = width_for(src.shape[1], src.shape[1])
        flops = tokens * decode_flops(
            shape, width, derived.answer_width_for(experiment.task, width)
        )
        return {
            "jab_tokens_per_s": tokens / jab_s, "torch_tokens_per_s": tokens / torch_s,
            "jab_over_torch": torch_s / jab_s, "jab_flops_per_s": flops / jab_s,
            "torch_threads": torch.get_num_threads(),
        }  # fmt: skip

    out["throughput"] = {length: throughput(length) for length in (200, 500)}
    train_flops = None
    saved = HERE / "results.json"
    with contextlib.suppress(OSError, KeyError, ValueError):
        train_flops = json.loads(saved.read_text())["train"]["shapes"]["preset"]["jab"]["packed"][
            "flops_per_s"
        ]
    out["train_flops_per_s"] = train_flops
    rows = [
        [str(n), fmt(r["jab_tokens_per_s"], ".0f"), fmt(r["torch_tokens_per_s"], ".0f"),
         f"{r['jab_over_torch']:.2f}x", fmt(r["jab_flops_per_s"] / 1e9, ".1f"),
         "" if train_flops is None else f"{r['jab_flops_per_s'] / train_flops:.0%}"]
        for n, r in out["throughput"].items()
    ]  # fmt: skip
    columns = ["symbols", "jab tokens/s", "PyTorch tokens/s", "jab/PyTorch", "jab GFLOP/s",
               "of training's"]  # fmt: skip
    console.print(table("decode-long: greedy decoding with a cache", columns, rows))
    note(
        "16 sources decoded to full length (<eos> never chosen), preset-shape sinusoidal "
        "model, random init; PyTorch with its own threads; training's GFLOP/s from the train "
        "section of benchmarks/results.json"
    )
    return out


# ---------------------------------------------------------------- logging


LOGGERS = ("none", "tensorboard", "wandb")


def bench_logging(sizes: Sizes) -> dict:
    from jabcli.training import session

    os.environ.setdefault("WANDB_MODE", "offline")
    speeds: dict[str, list[float]] = {name: [] for name in LOGGERS}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(sizes.logging_rounds):
            for name in LOGGERS:
                note(f"logging: round {round_ + 1}, {name}")
                experiment = resolve(
                    "reverse",
                    steps=sizes.logging_steps,
                    sets=["train.target_seq_acc=1.0", f"train.log_to={name.replace('none', '')}"],
                )
                outcome = session.start(experiment, Path(tmp) / f"{name}-{round_}")
                speeds[name].append((outcome.step - outcome.start_step) / outcome.elapsed_s)
    out = {name: {"steps_per_s": median(v), "each": v} for name, v in speeds.items()}
    base = out["none"]["steps_per_s"]
    rows = [
        [name, fmt(r["steps_per_s"], ".1f"), ", ".join(fmt(x, ".1f") for x in r["each"]),
         f"{r['steps_per_s'] / base:.3f}"]
        for name, r in out.items()
    ]  # fmt: skip
    console.print(table("logging", ["train.log_to", "steps/s", "each round", "ratio"], rows))
    note(
        f"reverse preset, {sizes.logging_steps} steps with evaluations, run by session.start "
        "in this process; steps/s over the whole loop"
    )
    return out


BENCHES: dict[str, Callable[[Sizes], dict]] = {
    "train": bench_train,
    "solve": bench_solve,
    "startup": bench_startup,
    "interactive": bench_interactive,
    "decode": bench_decode,
    "decode-long": bench_decode_long,
    "logging": bench_logging,
    "forms": bench_forms,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke-test sizes (a few minutes)")
    parser.add_argument("--out", type=Path, default=HERE / "results.json", help="JSON results file")
    parser.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help=f"comma-separated, from: {','.join(SECTIONS)}",
    )
    args = parser.parse_args(argv)
    args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = sorted(set(args.sections) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    return args


def write_json(path: Path, results: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1, default=float) + "\n")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    sizes = QUICK if args.quick else Sizes()
    results: dict[str, Any] = {
        "machine": machine_info(),
        "quick": args.quick,
        "sizes": asdict(sizes),
    }
    for section in SECTIONS:
        if section in args.sections:
            tic = time.perf_counter()
            results[section] = BENCHES[section](sizes)
            results[section]["section_s"] = time.perf_counter() - tic
            write_json(args.out, results)
    results["summary"] = summary_rows(results, sizes)
    print_summary(results["summary"], args.quick)
    write_json(args.out, results)
    note(f"results written to {args.out}")


if __name__ == "__main__":
    main()
