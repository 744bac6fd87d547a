"""Running a study: every cell in a process of its own, N at a time on this machine or as
Ray tasks on a cluster; Ctrl-C stops them all cleanly and a rerun picks up where they
stopped.

The driver (`run`) checks every cell, writes study.json and creates each cell's run
folder (as `jab train` would, untrained), then hands cells to workers. A worker is
`python -m jabcli.cli.worker STUDY_DIR CELL` running `work`: it trains the cell with
`session.resume` (from step 0, or from the checkpoint an interrupted study left), measures
it with what `jab eval --lengths` calls, and writes `evaluation.json` into the cell's
folder. It reports progress as JSON lines on stdout and errors on stderr (kept in the
study's logs/ folder); its exit status says how it ended.

On Ray, a task receives the cell's folder as a tar archive, runs the same worker in a
temporary folder of the node it lands on, and returns the folder the same way, so no
shared filesystem is needed; the driver puts it back in place of the old one.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import logging
import os
import queue
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jabcli.core.errors import JabError
from jabcli.studies import studies
from jabcli.studies.studies import Cell, Study

INTERRUPTED = (128 + signal.SIGINT, 128 + signal.SIGTERM, -signal.SIGINT, -signal.SIGTERM)


class StudyObserver:
    """What running a study reports, as it happens; every method may be left out."""

    def begin(self, study: Study, out: Path, todo: list[Cell], workers: str) -> None:
        """`todo` are the cells to run (the others are measured already)."""

    def note(self, message: str) -> None:
        """Something worth telling before the cells run: a cell trained again, say."""

    def started(self, cell: Cell) -> None:
        pass

    def event(self, cell: Cell, event: dict[str, Any]) -> None:
        """A worker's event: begin (step, steps), log (step, loss), eval (step, seq_acc),
        evaluating."""

    def finished(self, cell: Cell, evaluation: dict[str, Any]) -> None:
        pass

    def failed(self, cell: Cell, error: str) -> None:
        pass

    def stopped(self, cell: Cell) -> None:
        """An interrupted cell: its checkpoints are kept, a rerun resumes it."""

    def end(self) -> None:
        pass


@dataclass
class Summary:
    out: Path
    measured: list[Cell] = field(default_factory=list)  # before and during this run
    failed: dict[str, str] = field(default_factory=dict)  # cell name: error
    stopped: list[Cell] = field(default_factory=list)  # interrupted, or never started
    interrupted_by: int | None = None


def default_workers() -> int:
    """One cell per core: a step of jab's small models keeps about one core busy. On 2
    cores, four 3-seed cells of 300 steps took 99 s one at a time, 70 s two at a time and
    74 s four at a time (see README, Studies)."""
    return os.cpu_count() or 1


def run(
    study: Study,
    out: Path,
    workers: int | None = None,
    observer: StudyObserver | None = None,
    ray_address: str | None = None,
    cpus_per_cell: float = 1.0,
    gpus_per_cell: float = 0.0,
) -> Summary:
    """Run every cell of `study` not measured yet into the study folder `out`."""
    observer = observer or StudyObserver()
    if workers is not None and workers < 1:
        raise JabError(f"--workers must be at least 1, got {workers}")
    backend = (
        RayCells(ray_address, cpus_per_cell, gpus_per_cell)
        if ray_address is not None
        else LocalCells(workers or default_workers())
    )
    experiments = studies.check(study)
    for cell in study.cells if out.is_dir() else []:
        restore(out / cell.folder)
    plan = studies.check_folder(study, out)
    failed = plan.failed
    summary = Summary(out)
    by_folder = {cell.folder: cell for cell in study.cells}
    stop = Stop()
    todo: list[Cell] = []
    try:
        with stop, backend.open(out) as cells:
            todo = [cell for cell in study.cells if studies.evaluation_of(out, cell) is None]
            observer.begin(study, out, todo, backend.describe())
            for folder, changes in plan.kept.items():
                observer.note(f"{by_folder[folder].name}: {changes}")
            for folder, changes in plan.restart.items():  # said before it is done
                observer.note(
                    f"{by_folder[folder].name}: trains again from step 0, its training "
                    f"settings changed ({changes})"
                )
            prepare(study, out, experiments, plan, summary)
            running: set[str] = set()
            while True:
                while not stop.signum and todo and cells.free():
                    cell = todo.pop(0)
                    cells.start(cell)
                    running.add(cell.folder)
                    observer.started(cell)
                for folder, event in cells.events(timeout=0.2):
                    if folder in running:  # not a late event of a cell that has ended
                        observer.event(by_folder[folder], event)
                while stop.forwarded < stop.count:
                    cells.stop(stop.signum, second=stop.forwarded > 0)
                    stop.forwarded += 1
                for folder, code, error in cells.ended():
                    running.discard(folder)
                    cell = by_folder[folder]
                    evaluation = studies.evaluation_of(out, cell) if code == 0 else None
                    if evaluation is not None:
                        failed.pop(folder, None)
                        summary.measured.append(cell)
                        observer.finished(cell, evaluation)
                    elif stop.signum and code in INTERRUPTED:
                        summary.stopped.append(cell)
                        observer.stopped(cell)
                    else:
                        failed[folder] = error or died(code)
                        summary.failed[cell.name] = failed[folder]
                        observer.failed(cell, failed[folder])
                    studies.record(study, out, failed)
                if not cells.running() and (stop.signum or not todo):
                    break
    finally:
        observer.end()
    summary.stopped += todo
    # A stop that came when every cell had ended stopped nothing.
    summary.interrupted_by = stop.signum if summary.stopped else None
    return summary


def prepare(study: Study, out: Path, experiments, plan: studies.FolderPlan, summary) -> None:
    """Write study.json and create the run folder of every cell that has none (as `jab
    train` would, untrained), or whose training settings changed before it was measured;
    the cells measured already go into `summary`."""
    from jabcli.training import session

    out.mkdir(parents=True, exist_ok=True)
    for folder in plan.restart:  # an unmeasured cell the file now trains otherwise
        shutil.rmtree(out / folder)
    studies.record(study, out, plan.failed)
    for cell, experiment in zip(study.cells, experiments):
        if not (out / cell.folder).exists():
            session.create(experiment, out / cell.folder)
    summary.measured += [c for c in study.cells if studies.evaluation_of(out, c) is not None]


class Stop:
    """SIGINT and SIGTERM, noted for the driver's loop to forward to its workers (a
    second one is forwarded too: the workers then stop at once)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.count = 0  # signals received
        self.forwarded = 0  # signals passed on to the workers

    def __enter__(self) -> Stop:
        self.previous = {s: signal.signal(s, self.handle) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self.previous.items():
            signal.signal(s, handler)

    def handle(self, signum: int, frame) -> None:
        self.signum = signum
        self.count += 1


# running cells on this machine


class LocalCells:
    """Cells as worker processes on this machine, `workers` at a time."""

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def describe(self) -> str:
        return f"{self.workers} at a time on this machine"

    @contextlib.contextmanager
    def open(self, out: Path):
        self.out = out
        self.procs: dict[str, subprocess.Popen] = {}
        self.queue: queue.Queue = queue.Queue()
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
        proc, reader = launch(self.out, cell.folder, self.out / studies.LOGS)
        self.procs[cell.folder] = proc
        threading.Thread(target=reader, args=(self.queue.put,), daemon=True).start()

    def events(self, timeout: float) -> list[tuple[str, dict]]:
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
                error = last_line(log_path(self.out, folder), proc.log_start)
                done.append((folder, proc.returncode, error or died(proc.returncode)))
        return done


def launch(out: Path, folder: str, logs: Path):
    """Start a worker on the cell `folder` of the study folder `out`, its stderr appended
    to logs/<folder>.log; returns the process and a function that passes each of its
    events, as (folder, event), to a callback until it exits."""
    logs.mkdir(exist_ok=True)
    log = open(logs / f"{folder}.log", "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jabcli.cli.worker", str(out), folder],
        stdout=subprocess.PIPE,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # a terminal's Ctrl-C reaches the driver alone
        # Several JAX processes share a GPU only if none takes most of its memory up front.
        env={"XLA_PYTHON_CLIENT_PREALLOCATE": "false", **os.environ},
    )
    proc.log_start = log.tell()  # what this attempt writes, for its error line
    log.close()

    def reader(put: Callable[[tuple[str, dict]], None]) -> None:
        for line in proc.stdout:
            with contextlib.suppress(ValueError):
                put((folder, json.loads(line)))

    return proc, reader


def die_with_parent() -> None:
    """Linux: the worker gets SIGTERM if its driver dies without stopping it (kill -9),
    so that no worker trains on, orphaned, holding its cell's lock. (Asked for by the
    worker itself: a preexec_fn would make the driver fork a process that runs JAX.)"""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def drain(events: queue.Queue, timeout: float) -> list:
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


# running cells on a Ray cluster


class RayCells:
    """Cells as Ray tasks, each with the CPUs and GPUs it asks for; the cluster's free
    resources decide how many run at once."""

    def __init__(self, address: str, cpus: float, gpus: float) -> None:
        try:
            import ray
        except ImportError:
            raise JabError("--ray needs Ray: pip install 'jab[ray]'") from None
        if cpus <= 0 or gpus < 0:
            raise JabError(
                f"--cpus-per-cell must be positive and --gpus-per-cell zero or more, "
                f"got {cpus} and {gpus}"
            )
        self.ray, self.address, self.cpus, self.gpus = ray, address, cpus, gpus

    def describe(self) -> str:
        gpus = f", {self.gpus:g} GPU" if self.gpus else ""
        return f"as Ray tasks on {self.address} ({self.cpus:g} CPU{gpus} each)"

    @contextlib.contextmanager
    def open(self, out: Path):
        ray = self.ray
        started = not ray.is_initialized()
        if started:
            self.connect()
        try:
            self.check_resources()
            self.out = out
            self.coordinator = ray.remote(num_cpus=0)(Coordinator).remote()
            self.task = ray.remote(num_cpus=self.cpus, num_gpus=self.gpus, max_retries=0)(ray_cell)
            self.pending: dict[Any, str] = {}
            try:
                yield self
            finally:
                if self.pending:  # a driver that fails stops its tasks
                    self.coordinator.stop.remote()
                    with contextlib.suppress(Exception):
                        ray.wait(list(self.pending), num_returns=len(self.pending), timeout=60)
        finally:
            if started:  # the processes of a cluster started here end with it
                ray.shutdown()

    def connect(self) -> None:
        """Start a private cluster (`local`) or join one, keeping jab's own handling of
        SIGINT and SIGTERM (ray.init installs handlers that abort the driver)."""
        ray = self.ray
        address = resolve(self.address)
        reachable(address, self.address)
        handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        # Ray starts its processes by fork and exec at once: JAX's warning about forking
        # a multithreaded process does not apply. Its notice that a local cluster uses
        # token authentication is not jab's user's concern.
        warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
        logging.getLogger("ray").setLevel(logging.ERROR)
        try:
            ray.init(
                address=address,
                include_dashboard=False,
                log_to_driver=False,
                logging_level="ERROR",
                configure_logging=False,
            )
        except Exception as err:  # ConnectionError, or Ray's own kinds
            with contextlib.suppress(Exception):
                ray.shutdown()
            line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise JabError(f"could not reach the Ray cluster at {self.address}: {line}") from None
        finally:
            for signum, handler in handlers.items():
                signal.signal(signum, handler)

    def check_resources(self) -> None:
        """Refuse cells that ask for more than any node has: Ray would queue them forever."""
        nodes = [n.get("Resources", {}) for n in self.ray.nodes() if n.get("Alive")]
        for kind, asked in (("CPU", self.cpus), ("GPU", self.gpus)):
            most = max((n.get(kind, 0.0) for n in nodes), default=0.0)
            if asked > most:
                option = f"--{kind.lower()}s-per-cell"
                raise JabError(
                    f"{option} {asked:g}, but no node of the Ray cluster at {self.address} has "
                    f"more than {most:g} {kind}"
                )

    def free(self) -> bool:
        return True  # Ray queues a task until the cluster has its resources

    def running(self) -> bool:
        return bool(self.pending)

    def start(self, cell: Cell) -> None:
        record = (self.out / studies.STUDY_FILE).read_bytes()
        ref = self.task.remote(
            record, cell.folder, archive(self.out / cell.folder), self.coordinator
        )
        self.pending[ref] = cell.folder

    def events(self, timeout: float) -> list[tuple[str, dict]]:
        time.sleep(timeout)
        found = []
        for folder, line in self.ray.get(self.coordinator.drain.remote()):
            with contextlib.suppress(ValueError):
                found.append((folder, json.loads(line)))
        return found

    def stop(self, signum: int, second: bool = False) -> None:
        self.coordinator.stop.remote(signum)
        if second:  # tasks still waiting for room would keep the driver waiting: cancel
            # them, but never a started one, whose training comes back only as it returns
            started = set(self.ray.get(self.coordinator.started.remote()))
            for ref, folder in self.pending.items():
                if folder not in started:
                    with contextlib.suppress(Exception):
                        self.ray.cancel(ref)

    def ended(self) -> list[tuple[str, int, str]]:
        ready, _ = self.ray.wait(list(self.pending), num_returns=len(self.pending), timeout=0)
        done = []
        for ref in ready:
            folder = self.pending.pop(ref)
            try:
                code, log, data, tmp = self.ray.get(ref)  # tmp: the folder it ran in
            except self.ray.exceptions.TaskCancelledError:
                done.append((folder, INTERRUPTED[0], "cancelled"))
                continue
            except Exception as err:  # the task itself failed: a node lost, out of memory
                line = str(err).strip().splitlines()[-1] if str(err).strip() else repr(err)
                done.append((folder, 1, f"Ray task failed: {line}"))
                continue
            logs = self.out / studies.LOGS
            logs.mkdir(exist_ok=True)
            with open(logs / f"{folder}.log", "ab") as f:
                start = f.tell()
                f.write(log.replace(tmp.encode(), str(self.out).encode()) if tmp else log)
            if data:
                replace(self.out / folder, data)
            done.append((folder, code, last_line(logs / f"{folder}.log", start) or died(code)))
        return done


def resolve(address: str) -> str:
    """`auto` as Ray reads it (its documented order): RAY_ADDRESS, else the address the
    newest `ray start` on this machine left in ray_current_cluster; any other as given."""
    if address != "auto":
        return address
    if os.environ.get("RAY_ADDRESS"):
        return os.environ["RAY_ADDRESS"]
    temp = Path(os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp") / "ray"
    try:
        found = (temp / "ray_current_cluster").read_text().strip()
    except OSError:
        found = ""
    if not found:
        raise JabError(
            "--ray auto found no Ray cluster on this machine (start one with `ray start "
            "--head`, set RAY_ADDRESS, or use --ray local)"
        )
    return found


def reachable(address: str, given: str) -> None:
    """Refuse at once a host:port that nothing answers on (Ray itself would retry for
    minutes); `given` is the address as the user wrote it."""
    host, colon, port = address.rpartition(":")
    if address == "local" or "://" in address or not colon or not port.isdigit():
        return  # Ray's client (ray://) says for itself
    try:
        socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=10).close()
    except OSError as err:
        reason = err.strerror or type(err).__name__
        where = address if address == given else f"{address} ({given})"
        stale = " (a cluster that has stopped?)" if given == "auto" else ""
        raise JabError(f"could not reach the Ray cluster at {where}{stale}: {reason}") from None


class Coordinator:
    """A Ray actor between the driver and its tasks: their events, and the stop signal."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.stops: list[int] = []
        self.begun: list[str] = []

    def begin(self, folder: str) -> bool:
        """Whether a task may start its cell (not once the driver was stopped); a task
        that may is noted as started, for `started`."""
        if self.stops:
            return False
        self.begun.append(folder)
        return True

    def started(self) -> list[str]:
        return self.begun

    def report(self, folder: str, line: str) -> None:
        self.events.append((folder, line))

    def drain(self) -> list[tuple[str, str]]:
        found, self.events = self.events, []
        return found

    def stop(self, signum: int = signal.SIGINT) -> None:
        self.stops.append(signum)

    def stopping(self) -> list[int]:
        return self.stops


def ray_cell(record: bytes, folder: str, data: bytes, coordinator) -> tuple[int, bytes, bytes, str]:
    """A Ray task: the worker on one cell, in a temporary study folder on this node.
    Returns its exit status, its stderr, the cell's folder as a tar archive and the
    temporary folder's path (which the driver writes as its own in the log)."""
    import ray

    if not ray.get(coordinator.begin.remote(folder)):  # stopped before it started
        return INTERRUPTED[0], b"", b"", ""
    with tempfile.TemporaryDirectory(prefix="jab-cell-") as tmp:
        out = Path(tmp)
        (out / studies.STUDY_FILE).write_bytes(record)
        unpack(data, out)
        proc, reader = launch(out, folder, out / studies.LOGS)
        thread = threading.Thread(
            target=reader, args=(lambda e: coordinator.report.remote(e[0], json.dumps(e[1])),)
        )
        thread.start()
        forwarded = 0  # each Ctrl-C the driver got, passed on once
        while proc.poll() is None:
            time.sleep(0.5)
            stops = ray.get(coordinator.stopping.remote())
            for signum in stops[forwarded:]:
                proc.send_signal(signum)
            forwarded = len(stops)
        thread.join()
        return proc.returncode, log_path(out, folder).read_bytes(), archive(out / folder), tmp


def archive(path: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(
            path,
            arcname=path.name,
            filter=lambda info: None if info.name.endswith("/.lock") else info,
        )
    return buffer.getvalue()


def unpack(data: bytes, into: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.10.12 and 3.11.4 on
            tar.extractall(into, filter="data")
        else:  # the archive is one jab wrote
            tar.extractall(into)


def replace(path: Path, data: bytes) -> None:
    """Put a cell folder that came back from a Ray task in place of `path`: unpacked beside
    it first, then swapped in by renames, so that a kill leaves one or the other whole."""
    incoming = Path(tempfile.mkdtemp(prefix=f".{path.name}.incoming-", dir=path.parent))
    unpack(data, incoming)
    old = path.with_name(f".{path.name}.old-{os.getpid()}")
    if path.exists():
        os.replace(path, old)
    os.replace(incoming / path.name, path)
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(incoming, ignore_errors=True)


def restore(path: Path) -> None:
    """Undo a swap `replace` did not finish (a kill between its renames): the old folder
    comes back if the new one never arrived; left-over halves are removed."""
    for old in sorted(path.parent.glob(f".{path.name}.old-*")):
        if path.exists():
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(old, path)
    for incoming in path.parent.glob(f".{path.name}.incoming-*"):
        shutil.rmtree(incoming, ignore_errors=True)


# the worker's job (jabcli/cli/worker.py is its process)


class CellObserver:
    """A training session's events as JSON lines on stdout, for the driver."""

    def __init__(self, emit: Callable[[dict], None]) -> None:
        self.emit = emit

    def begin(self, path, experiment, start_step: int, parameters: int, flops=None) -> None:
        self.emit({"event": "begin", "step": start_step, "steps": experiment.config.train.steps})

    def note(self, message: str) -> None:
        self.emit({"event": "note", "message": message})

    def resuming(self, path: Path, step: int, fresh: bool) -> None:
        if not fresh:  # a cell that has not begun just begins
            self.note(f"Resuming {path} from step {step}")

    def log(self, records: list[dict[str, Any]]) -> None:
        loss = statistics.median(r["loss"] for r in records)  # of the seeds
        self.emit({"event": "log", "step": records[0]["step"], "loss": loss})

    def evaluated(self, results: list[dict[str, Any]]) -> None:
        score = statistics.median(r["seq_acc"] for r in results)
        self.emit({"event": "eval", "step": results[0]["step"], "seq_acc": score})

    def end(self) -> None:
        pass


def work(out: Path, folder: str, emit: Callable[[dict], None]) -> int:
    """Train the cell `folder` of the study folder `out` to its steps (resuming what is
    there), measure it, and write its evaluation.json; returns the exit status."""
    from jabcli.core import runtime
    from jabcli.inspection import inspection, listing
    from jabcli.runs import runs
    from jabcli.training import session

    runtime.configure()
    record = studies.recorded(out)
    cell = next((c for c in record["cells"] if c.get("folder") == folder), None)
    if cell is None:
        raise JabError(f"{out}/{studies.STUDY_FILE} has no cell {folder!r}")
    path = out / folder
    _, seeds = runs.open_runs(path)
    steps = cell["steps"]  # the study's, which may have grown or shrunk since it started
    done = [listing.summary(run) for run in seeds]
    if not all(run["state"] == "target reached" or run["step"] >= steps for run in done):
        outcome = session.resume(path, steps, CellObserver(emit))
        if outcome.interrupted_by is not None:
            return 128 + outcome.interrupted_by
    emit({"event": "evaluating"})
    evaluate = record["evaluate"]
    tic = time.perf_counter()
    _, loaded = inspection.load_runs(path, "latest")
    experiment = loaded[0].experiment
    low = max(evaluate["lengths"][0], experiment.task.min_length)
    high = evaluate["lengths"][1]  # every cell's model takes it (`studies.check`)
    result = inspection.evaluate_runs(
        path,
        loaded,
        evaluate["samples"],
        low,
        high,
        evaluate["seed"],
        each_length=True,
        force_length=evaluate["force_length"],
    )
    evaluation = {
        "spec": cell["spec"],
        "step": result["step"],
        "task": result["task"],
        "pos_encoding": result["pos_encoding"],
        "train_lengths": result["train_lengths"],
        "longest": high,
        "train_s": max(listing.training_seconds(run.read_metrics()) for run in seeds),
        "eval_s": time.perf_counter() - tic,
        "seeds": [
            {
                "seed": one.experiment.config.train.seed,
                "per_length": {
                    str(n): {k: row[k] for k in inspection.FIGURES if k in row}
                    for n, row in each["per_length"].items()
                },
            }
            for one, each in zip(loaded, result.get("seeds", [result]))
        ],
    }
    runs.atomic_write(path / studies.EVALUATION_FILE, json.dumps(evaluation).encode())
    emit({"event": "done"})
    return 0
