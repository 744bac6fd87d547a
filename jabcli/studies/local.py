"""Cells as worker processes on this machine, N at a time (`LocalCells`), and what any
worker process needs, on this machine or in a Ray task: starting it (`launch`), its events
as JSON lines, how it ended (its exit status, its last line on stderr), and its death with
the driver."""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from jabcli.studies import studies
from jabcli.studies.events import WorkerEvent
from jabcli.studies.studies import Cell

# How a worker stopped by SIGINT or SIGTERM exits: by its own handler, or killed by it.
INTERRUPTED = (128 + signal.SIGINT, 128 + signal.SIGTERM, -signal.SIGINT, -signal.SIGTERM)

Event = tuple[str, WorkerEvent]  # a worker's event, with the folder of its cell


class LocalCells:
    """Cells as worker processes on this machine, `workers` at a time."""

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def describe(self) -> str:
        return f"{self.workers} at a time on this machine"

    @contextlib.contextmanager
    def open(self, out: Path):
        self.out = out
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.log_starts: dict[str, int] = {}  # where each worker's attempt begins in its log
        self.queue: queue.Queue[Event] = queue.Queue()
        try:
            yield self
        finally:
            for proc in self.procs.values():  # a driver that fails stops its workers
                with contextlib.suppress(OSError):
                    proc.send_signal(signal.SIGINT)
            for proc in self.procs.values():
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=60)
                with contextlib.suppress(OSError):
                    proc.kill()

    def free(self) -> bool:
        return len(self.procs) < self.workers

    def running(self) -> bool:
        return bool(self.procs)

    def start(self, cell: Cell) -> None:
        # This attempt's lines, for its error line, begin where the log ends now (it holds
        # earlier attempts too).
        log = log_path(self.out, cell.folder)
        self.log_starts[cell.folder] = log.stat().st_size if log.is_file() else 0
        proc, reader = launch(self.out, cell.folder, self.out / studies.LOGS)
        self.procs[cell.folder] = proc
        threading.Thread(target=reader, args=(self.queue.put,), daemon=True).start()

    def events(self, timeout: float) -> list[Event]:
        return drain(self.queue, timeout)

    def stop(self, signum: int, second: bool = False) -> None:
        for proc in self.procs.values():
            with contextlib.suppress(OSError):
                proc.send_signal(signum)

    def ended(self) -> list[tuple[str, int, str]]:
        done = []
        for folder, proc in list(self.procs.items()):
            if proc.poll() is not None:
                del self.procs[folder]
                error = last_line(log_path(self.out, folder), self.log_starts.pop(folder))
                done.append((folder, proc.returncode, error or died(proc.returncode)))
        return done


def launch(
    out: Path,
    folder: str,
    logs: Path,
    trusted: bool = False,
    env: dict[str, str] | None = None,
) -> tuple[subprocess.Popen[bytes], Callable[[Callable[[Event], None]], None]]:
    """Start a worker on the cell `folder` of the study folder `out`, its stderr appended
    to logs/<folder>.log; returns the process and a function that passes each of its
    events, as (folder, event), to a callback until it exits. `trusted`: the user's code
    in the cell was checked by the driver (a Ray cell on another machine), so the worker
    imports it (JAB_TRUST_CODE). `env`: added to its environment (a Ray cell's devices)."""
    logs.mkdir(exist_ok=True)
    log = open(logs / f"{folder}.log", "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jabcli.cli.worker", str(out), folder],
        stdout=subprocess.PIPE,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # a terminal's Ctrl-C reaches the driver alone
        # Several JAX processes share a GPU only if none takes most of its memory up front.
        env={
            "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
            **os.environ,
            **(env or {}),
            **({"JAB_TRUST_CODE": "1"} if trusted else {}),
        },
    )
    log.close()

    def reader(put: Callable[[Event], None]) -> None:
        assert proc.stdout is not None  # stdout=PIPE
        for line in proc.stdout:
            event = WorkerEvent.from_json(line)
            if event is not None:
                put((folder, event))

    return proc, reader


def die_with_parent() -> None:
    """Linux: the worker gets SIGTERM if its driver dies without stopping it (kill -9),
    so that no worker trains on, orphaned, holding its cell's lock. (Asked for by the
    worker itself: a preexec_fn would make the driver fork a process that runs JAX.)"""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def drain(events: queue.Queue[Event], timeout: float) -> list[Event]:
    try:
        found = [events.get(timeout=timeout)]
    except queue.Empty:
        return []
    while True:
        try:
            found.append(events.get_nowait())
        except queue.Empty:
            return found


def log_path(out: Path, folder: str) -> Path:
    return out / studies.LOGS / f"{folder}.log"


def died(code: int) -> str:
    """How a worker that said nothing ended."""
    if code < 0:
        return f"its worker was killed by signal {-code} ({signal.Signals(-code).name})"
    return f"its worker exited with status {code}"


def last_line(path: Path, start: int = 0) -> str:
    """The last line a worker wrote on stderr since `start` (its log holds earlier
    attempts too): its one-line error, or a traceback's end."""
    try:
        with open(path, "rb") as log:
            log.seek(start)
            lines = log.read().decode(errors="replace").strip().splitlines()
    except OSError:
        return ""
    line = lines[-1] if lines else ""
    return line.removeprefix("jab: error: ").strip()
