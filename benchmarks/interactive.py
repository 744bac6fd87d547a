"""Wall time of the commands a user waits on, beside `import jax` alone, and where a warm
`jab predict` spends its time (docs/performance.md, "Start-up and interactive commands").

    python benchmarks/interactive.py [--run RUN] [--repeats 5] [--cpu 0] [--profile]
                                     [--before DIR]

Every command runs once untimed, so that the OS file cache, Python's bytecode and jab's and
JAX's own caches are as warm as a user's on a second call (PYTHONDONTWRITEBYTECODE is
unset for them: set, every jab module is compiled again in every process), then --repeats
times in fresh processes, the commands taking turns, each pinned to core --cpu (on a shared
machine, pick a quiet one). Without --run, a run is trained first into a temporary folder
(`jab train --task reverse --steps 100`, about 20 s).

--before DIR times another version of jab beside this one, taking turns with it: DIR holds
its source, as `git archive COMMIT jabcli tasks | tar -x -C DIR` writes it.

--profile adds one more warm `jab predict`, run inside this script's child with timers:
its imports by package (`python -X importtime`, self time; those `import jax` makes too
apart), then its work net of imports: reading the checkpoint, building the experiment and
its parameters, JAX's tracing, lowering and compiling (or loading from the persistent
cache) of each program, and the rest (running the programs, Typer, drawing the table).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib._bootstrap as bootstrap
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

START, START_CLOCK = time.perf_counter(), time.time()
INPUT = "12345"
IMPORT_JAX = "python -c 'import jax'"
PREDICT = f"jab predict --run RUN {INPUT}"
TOP = {"jaxlib": "jax", "click": "typer", "pydantic_core": "pydantic", "_yaml": "yaml"}


def jab_executable() -> str:
    beside = Path(sys.executable).with_name("jab")
    return str(beside) if beside.exists() else "jab"


def commands(run: str, before: str | None) -> dict[str, tuple[list[str], str | None]]:
    """Each command's label, and its arguments and the jab source it runs (None: this
    one; else a folder put first on PYTHONPATH)."""
    jab = jab_executable()
    found = {IMPORT_JAX: ([sys.executable, "-c", "import jax"], None)}
    for label, args in (
        ("jab --help", ["--help"]),
        ("jab tasks", ["tasks"]),
        (PREDICT, ["predict", "--run", run, INPUT]),
    ):
        if before is not None:
            found[f"{label}, before"] = ([jab, *args], before)
        found[label] = ([jab, *args], None)
    return found


def started(cpu: int | None, source: str | None = None) -> dict:
    """How to start a child process: pinned to `cpu`, Python's bytecode cache on, and
    jab from `source` when given."""
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if source is not None:
        env["PYTHONPATH"] = source
    return {"preexec_fn": pin, "env": env}


def wall(command: list[str], cpu: int | None, source: str | None) -> float:
    tic = time.perf_counter()
    subprocess.run(command, capture_output=True, check=True, **started(cpu, source))
    return time.perf_counter() - tic


def time_commands(
    run: str, repeats: int, cpu: int | None, before: str | None
) -> dict[str, list[float]]:
    found = commands(run, before)
    for command, source in found.values():  # warm every cache a second call finds warm
        wall(command, cpu, source)
    seconds: dict[str, list[float]] = {label: [] for label in found}
    for _ in range(repeats):
        for label, (command, source) in found.items():
            seconds[label].append(wall(command, cpu, source))
    return seconds


def print_times(seconds: dict[str, list[float]], cpu: int | None) -> None:
    runs = len(seconds[IMPORT_JAX])
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nWhole-process wall time, warm, {runs} runs each, core {cpu} (load {load})")
    print(f"{'command':<38}{'median':>9}{'min':>8}  each (s)")
    for label, values in seconds.items():
        each = ", ".join(f"{v:.2f}" for v in values)
        print(f"{label:<38}{statistics.median(values):8.2f}s{min(values):7.2f}s  {each}")
    jax_alone = statistics.median(seconds[IMPORT_JAX])
    for label in (f"{PREDICT}, before", PREDICT):
        if label in seconds:
            over = statistics.median(seconds[label]) - jax_alone
            print(f"{label} - import jax: {over:.2f} s (goal: at most 0.5 s)")


# ---------------------------------------------------------------- the profile


def union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for begin, end in sorted(spans):
        if merged and begin <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([begin, end])
    return [(begin, end) for begin, end in merged]


def net(spans: list[tuple[float, float]], minus: list[tuple[float, float]]) -> float:
    """Seconds inside `spans` and outside `minus` (both made disjoint first)."""
    total = 0.0
    for begin, end in union(spans):
        total += end - begin
        for other_begin, other_end in minus:
            total -= max(0.0, min(end, other_end) - max(begin, other_begin))
    return total


def profile_child(run: str) -> None:
    """One `jab predict` in this process, with timers; prints one JSON line. Run under
    `python -X importtime` by `profile`."""
    from jabcli.core import runtime

    runtime.hold_collections()  # as the jab process does, before its imports
    imports: list[tuple[float, float]] = []
    depth = 0
    find_and_load = bootstrap._find_and_load

    def timed_import(*args):  # outermost imports only: nested ones are inside them
        nonlocal depth
        depth += 1
        tic = time.perf_counter()
        try:
            return find_and_load(*args)
        finally:
            depth -= 1
            if depth == 0:
                imports.append((tic, time.perf_counter()))

    bootstrap._find_and_load = timed_import
    spans: dict[str, list[tuple[float, float]]] = {}

    def timer(owner, name: str, phase: str) -> None:
        inner = getattr(owner, name)  # a class's: bound already

        def timed(*args, **kwargs):
            tic = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                spans.setdefault(phase, []).append((tic, time.perf_counter()))

        setattr(owner, name, staticmethod(timed) if isinstance(owner, type) else timed)

    from jabcli import __main__
    from jabcli.experiment import experiment
    from jabcli.training import checkpoints

    timer(checkpoints, "repaired", "read the checkpoint")
    timer(checkpoints, "chosen", "read the checkpoint")
    timer(experiment.Experiment, "create", "build the experiment")
    timer(checkpoints, "params_of", "parameters from the checkpoint")

    from jax._src import dispatch, monitoring

    events = {
        dispatch.JAXPR_TRACE_EVENT: "trace",
        dispatch.JAXPR_TO_MLIR_MODULE_EVENT: "lower",
        dispatch.BACKEND_COMPILE_EVENT: "compile or load from the cache",
    }
    programs: list[str] = []

    def on_span(event: str, begin: float, end: float, **kwargs) -> None:
        if event in events:  # time.time() spans: moved onto perf_counter's clock
            shift = time.perf_counter() - time.time()
            name = kwargs.get("fun_name", "?")
            which = "decoding program" if "answer" in name else "small programs"
            spans.setdefault(f"JAX, {which}: {events[event]}", []).append(
                (begin + shift, end + shift)
            )
            if event == dispatch.BACKEND_COMPILE_EVENT:
                programs.append(name)

    monitoring.register_event_time_span_listener(on_span)
    tic = time.perf_counter()
    sys.argv = ["jab", "predict", "--run", run, INPUT]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        __main__.main()
    done = time.perf_counter()
    all_imports = union(imports)
    decoding = [span for phase, found in spans.items() if "decoding" in phase for span in found]
    phases = {  # the small programs' time nested in the decoding program's is its own
        phase: net(found, union(all_imports + (decoding if "small" in phase else [])))
        for phase, found in spans.items()
    }
    result = {
        "before_main_s": tic - START,
        "main_s": done - tic,
        "imports_s": net(all_imports, []),
        "phases_s": phases,
        "programs": programs,
        "started_at": START_CLOCK,
        "finished_at": time.time(),
    }
    print(json.dumps(result), flush=True)


def import_self_times(stderr: str, chosen) -> dict[str, float]:
    """Seconds of `python -X importtime` self time by package, of the modules `chosen`
    (a module's name -> bool) picks."""
    found: dict[str, float] = {}
    for own, name in re.findall(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", stderr):
        if chosen(name):
            top = TOP.get(name.split(".")[0], name.split(".")[0])
            found[top] = found.get(top, 0.0) + int(own) / 1e6
    return found


def modules_of_import_jax(cpu: int | None) -> set[str]:
    command = [sys.executable, "-X", "importtime", "-c", "import jax"]
    done = subprocess.run(command, capture_output=True, text=True, check=True, **started(cpu))
    return set(re.findall(r"import time:\s+\d+ \|\s+\d+ \|\s*(\S+)", done.stderr))


def profile(run: str, cpu: int | None) -> None:
    command = [sys.executable, "-X", "importtime", __file__, "--profile-child", run]
    spawned = time.time()
    done = subprocess.run(command, capture_output=True, text=True, check=True, **started(cpu))
    ended = time.time()
    process = ended - spawned
    line = next(x for x in done.stdout.splitlines() if x.startswith("{"))
    child = json.loads(line)
    start, exit_ = child["started_at"] - spawned, ended - child["finished_at"]
    known = ("jax", "haiku", "optax", "numpy", "ml_dtypes", "scipy", "typer", "pydantic")
    known += ("rich", "yaml", "jabcli")
    print(f"\nOne warm jab predict, profiled (python -X importtime, core {cpu}): {process:.2f} s")
    jax_alone = modules_of_import_jax(cpu)
    for what, chosen in (
        ("the modules import jax imports too", lambda name: name in jax_alone),
        ("the others", lambda name: name not in jax_alone),
    ):
        packages = import_self_times(done.stderr, chosen)
        grouped = {name: packages.pop(name, 0.0) for name in known}
        grouped["the standard library and others"] = sum(packages.values())
        shown = sorted(grouped.items(), key=lambda kv: -kv[1])
        print(f"  imports, {what}: {sum(grouped.values()):.2f} s self time")
        print("    " + ", ".join(f"{name} {t:.3f} s" for name, t in shown if t >= 0.005))
    phases = child["phases_s"]
    print("  work, net of the imports inside it:")
    for name, seconds in phases.items():
        print(f"    {name:<40}{seconds:6.3f} s")
    print(f"    ({len(child['programs'])} programs: {', '.join(child['programs'])})")
    print(f"  interpreter start (to this script's first line) {start:.3f} s, exit {exit_:.3f} s")
    rest = process - start - exit_ - child["imports_s"] - sum(phases.values())
    print(f"  the rest (running the programs, Typer, the table): {rest:.2f} s")


def train_run(folder: Path) -> str:
    out = folder / "reverse"
    train = [jab_executable(), "train", "--task", "reverse", "--steps", "100", "--out", str(out)]
    subprocess.run(train, capture_output=True, check=True)
    return str(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", help="a trained run (default: train one, about 20 s)")
    parser.add_argument("--repeats", type=int, default=5, metavar="N")
    parser.add_argument("--cpu", type=int, default=None, help="pin every command to this core")
    parser.add_argument("--profile", action="store_true", help="also profile one predict")
    parser.add_argument("--before", metavar="DIR", help="another jab source to time beside")
    parser.add_argument("--profile-child", metavar="RUN", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.profile_child:
        profile_child(args.profile_child)
        return
    with tempfile.TemporaryDirectory(prefix="jab-interactive-") as folder:
        run = args.run or train_run(Path(folder))
        if args.repeats > 0:  # 0: the profile alone
            print_times(time_commands(run, args.repeats, args.cpu, args.before), args.cpu)
        if args.profile:
            profile(run, args.cpu)


if __name__ == "__main__":
    main()
