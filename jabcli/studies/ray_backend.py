"""Cells as Ray tasks on a cluster (`RayCells`), each with the CPUs and GPUs it asks for.
A task receives the cell's folder as a tar archive, runs the same worker in a temporary
folder of the node it lands on, and returns the folder the same way, so no shared
filesystem is needed; the driver puts it back in place of the old one, by renames that a
kill cannot leave half done (`replace`, `restore`). A small actor (`Coordinator`) carries
the tasks' events to the driver and its stop signal to them."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import signal
import socket
import tarfile
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from jabcli.core import devices
from jabcli.core.errors import JabError, install
from jabcli.studies import studies, study_folder
from jabcli.studies.events import WorkerEvent
from jabcli.studies.local import INTERRUPTED, died, last_line, launch, log_path
from jabcli.studies.studies import Cell


class RayCells:
    """Cells as Ray tasks, each with the CPUs and GPUs it asks for; the cluster's free
    resources decide how many run at once."""

    def __init__(self, address: str, cpus: float, gpus: float) -> None:
        try:
            import ray
        except ImportError:
            raise JabError(f"--ray needs Ray: {install('ray')}") from None
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
        from jabcli.tasks import user_code

        # The user's code in the cell is sent only if trusted here: the node trusts its driver.
        user_code.check_folder(self.out / cell.folder)
        record = (self.out / study_folder.STUDY_FILE).read_bytes()
        ref = self.task.remote(
            record, cell.folder, archive(self.out / cell.folder), self.coordinator
        )
        self.pending[ref] = cell.folder

    def events(self, timeout: float) -> list[tuple[str, WorkerEvent]]:
        time.sleep(timeout)
        found = []
        for folder, line in self.ray.get(self.coordinator.drain.remote()):
            event = WorkerEvent.from_json(line)
            if event is not None:
                found.append((folder, event))
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
    """A Ray task: the worker on one cell, in a temporary study folder on this node, with
    the GPUs Ray assigned it (`devices.cell_environment`). Returns its exit status, its
    stderr, the cell's folder as a tar archive and the temporary folder's path (which the
    driver writes as its own in the log)."""
    import ray

    if not ray.get(coordinator.begin.remote(folder)):  # stopped before it started
        return INTERRUPTED[0], b"", b"", ""
    with tempfile.TemporaryDirectory(prefix="jab-cell-") as tmp:
        out = Path(tmp)
        (out / study_folder.STUDY_FILE).write_bytes(record)
        unpack(data, out)
        gpus = ray.get_runtime_context().get_assigned_resources().get("GPU", 0.0)
        env = devices.cell_environment(gpus)  # (which GPUs it sees: Ray's CUDA_VISIBLE_DEVICES)
        proc, reader = launch(out, folder, out / studies.LOGS, trusted=True, env=env)
        thread = threading.Thread(
            target=reader, args=(lambda e: coordinator.report.remote(e[0], e[1].to_json()),)
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
