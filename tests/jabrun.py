"""Running `jab` the way a user does: a real subprocess (`jab`), or, where what is tested
is what jab prints and not the process itself, the same entry point in this process
(`jab_here`): the same argument parsing, output and exit codes, without a Python start-up
and an import of JAX per call."""

import contextlib
import fcntl
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

TINY = [
    "--task",
    "copy",
    "--seed",
    "0",
    "--set",
    "task.max_len=5",
    "--set",
    "task.alphabet=0123",
    "--set",
    "model.d_model=16",  # small and slow enough that 300 steps never reach the target:
    "--set",
    "model.d_ff=32",  # the run (tests' `trained`) has checkpoints at 100, 200 and 300
    "--set",
    "model.num_layers=1",
    "--set",
    "train.batch_size=32",
    "--set",
    "train.learning_rate=0.0015",
    "--set",
    "train.eval_every=100",
    "--set",
    "train.warmup_steps=50",
    "--set",
    "train.target_seq_acc=1.0",
]
# The same as KEY=VALUE settings, for a test that trains from Python a model shaped as the
# session's tiny run, whose programs are then in the session's compilation cache.
TINY_SETS = [TINY[i + 1] for i, arg in enumerate(TINY) if arg == "--set"]


def overrides(sets: list[str]) -> dict:
    """KEY=VALUE settings as the API's `overrides`, each value of its key's type (YAML
    reads 0123 as a number; an alphabet is text)."""
    import yaml

    pairs = (setting.split("=", 1) for setting in sets)
    return {key: raw if key == "task.alphabet" else yaml.safe_load(raw) for key, raw in pairs}


TINY_OVERRIDES = overrides(TINY_SETS)


def env() -> dict:
    values = {**os.environ, "COLUMNS": "160", "NO_COLOR": "1"}
    values.pop("JAB_DEBUG", None)
    return values


def jab_here(
    *args, cwd: Path, check: bool = True, columns: int = 160, stdin: bytes | str = b""
) -> subprocess.CompletedProcess:
    """`jab ARGS` run by `cli.main` in this process, in folder `cwd`, its output `columns`
    wide (as COLUMNS sets it for a pipe), reading `stdin`; stdout, stderr and the exit
    status as a subprocess would give them."""
    from jabcli.cli import cli, display

    out, err = io.StringIO(), io.StringIO()
    data = stdin.encode() if isinstance(stdin, str) else stdin
    before, width, reading = os.getcwd(), display.console.width, sys.stdin
    os.chdir(cwd)
    display.console.width = columns
    sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                cli.main([str(a) for a in args])
                code = 0
            except SystemExit as ended:
                code = ended.code if isinstance(ended.code, int) else int(ended.code is not None)
    finally:
        os.chdir(before)
        display.console.width = width
        sys.stdin = reading
    result = subprocess.CompletedProcess(
        ["jab", *map(str, args)], code, out.getvalue(), err.getvalue()
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def jab(*args, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "jabcli", *map(str, args)],
        cwd=cwd,
        env=env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def interrupt_after(args, cwd: Path, run: Path, min_lines: int, signum=signal.SIGINT):
    """Start `jab`, send `signum` once metrics.jsonl has `min_lines` lines; return the result."""
    metrics = cwd / run / "metrics.jsonl"
    return interrupt_when(
        args,
        cwd,
        lambda: metrics.exists() and len(metrics.read_text().splitlines()) >= min_lines,
        signum,
    )


def interrupt_when(args, cwd: Path, ready, signum=signal.SIGINT):
    """Start `jab`, send `signum` once `ready()` is true; return its exit code, stdout and
    stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "jabcli", *map(str, args)],
        cwd=cwd,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if ready():
            proc.send_signal(signum)
            break
        time.sleep(0.05)
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


def once(tmp_path_factory, worker_id: str, name: str, make) -> tuple[Path, str]:
    """A fresh folder `name` and the text `make(folder)` returns, made once for the whole
    test session: pytest-xdist's workers share it (the first to ask makes it, the others
    wait for it), so what takes a training run is not done once per worker."""
    if worker_id == "master":  # no xdist
        cwd = tmp_path_factory.mktemp(name)
        return cwd, make(cwd)
    root = tmp_path_factory.getbasetemp().parent  # this session's, common to its workers
    cwd, made = root / name, root / f"{name}.out"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not made.exists():  # or a worker before failed to make it: afresh
            shutil.rmtree(cwd, ignore_errors=True)
            cwd.mkdir()
            made.write_text(make(cwd))
    return cwd, made.read_text()


def compiling(program: str, log: str) -> bool:
    """Whether JAX's log (JAX_LOG_COMPILES) says it compiled `program`: 'Compiling
    jit(NAME)' in today's JAX, 'Compiling NAME with global shapes' in 0.6 (Python 3.10's)."""
    return f"Compiling jit({program})" in log or f"Compiling {program} with" in log


# studies/smoke.yaml with one encoding, randomized (positions drawn at random, so that
# equal results after a resume or on Ray say the draws are reproducible): two cells, each
# a worker process, instead of four.
SMOKE = Path(__file__).resolve().parents[1] / "studies" / "smoke.yaml"
SMOKE_TEXT = SMOKE.read_text().replace("[sinusoidal, randomized]", "[randomized]")
CELLS = ["copy-randomized", "reverse-randomized"]
assert SMOKE_TEXT != SMOKE.read_text()  # the file still grids those two encodings


# What a study's results are compared by: a run's metrics less its timings.
TIMING = ("steps_per_sec", "elapsed_s")


def results(folder: Path, cells: list[str] = CELLS) -> dict:
    """Every seed's metrics (less timings) and every cell's evaluation by seed."""
    found = {}
    for cell in cells:
        for seed in (0, 1):
            lines = (folder / cell / f"seed-{seed}" / "metrics.jsonl").read_text().splitlines()
            found[cell, seed] = [
                {k: v for k, v in json.loads(line).items() if k not in TIMING} for line in lines
            ]
        found[cell] = json.loads((folder / cell / "evaluation.json").read_text())["seeds"]
    return found


def one_cell(tmp_path: Path) -> Path:
    """The smoke study's first cell alone (what it trains and measures is the same)."""
    path = tmp_path / "copy.yaml"
    path.write_text(SMOKE_TEXT.replace("[copy, reverse]", "[copy]"))
    return path


ONE_CELL = CELLS[:1]


# A study of tiny cells (a study file's start: its rows or grid follow).
TINY_BASE = """
base:
  task: copy
  steps: 60
  set:
    task.max_len: 4
    task.alphabet: "012"
    model.d_model: 16
    model.d_ff: 32
    model.num_layers: 1
    train.batch_size: 16
    train.eval_every: 30
    train.log_every: 30
evaluate: {lengths: 1-5, samples: 5}
"""
