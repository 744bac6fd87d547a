"""Running `jab` the way a user does: a real subprocess."""

import os
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


def env() -> dict:
    values = {**os.environ, "COLUMNS": "160", "NO_COLOR": "1"}
    values.pop("JAB_DEBUG", None)
    return values


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
