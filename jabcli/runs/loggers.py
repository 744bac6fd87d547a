"""Training logs in TensorBoard and Weights & Biases, beside metrics.jsonl.

`train.log_to` names the loggers ("tensorboard", "wandb" or both, comma-separated). Each
seed of a run is one logged run: TensorBoard event files in the run's own folder (so
`tensorboard --logdir runs` lists runs by their folders, as `jab runs` does), a W&B run
named after the run folder, grouped by its group of seeds, with its files under
`RUN/wandb/` (or `$WANDB_DIR`). Both receive every metrics.jsonl record as scalars,
tagged `train/KEY` for a training batch's figures and `held_out/KEY` for an
evaluation's (`eval_seq_acc` becomes `held_out/seq_acc`); W&B also receives the
resolved config and, at the end, the last evaluation's per-length table.

A logger never fails a run: the first error it raises is told once, as a warning, and
that logger stops. What can be refused before training (an unknown logger, a missing
extra, a folder that cannot be written) is refused by `check`.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from jabcli.core.errors import JabError, install
from jabcli.core.settings import Config

if TYPE_CHECKING:
    from jabcli.evaluation.figures import HeldOutResult
    from jabcli.runs.metrics import LogRecord
    from jabcli.runs.runs import Run

# The module each logger writes with, and the optional extra that installs it.
EXTRAS = {"tensorboard": ("tensorboardX", "tensorboard"), "wandb": ("wandb", "wandb")}
NOT_SCALARS = ("step", "elapsed_s")  # the x axis, and what the logger's clock already says
ID_FILE = "wandb-id"  # in a run folder: the id of its W&B run, which a resume continues


def names(log_to: str) -> list[str]:
    """The loggers `train.log_to` asks for, in its order, each once."""
    return list(dict.fromkeys(name.strip() for name in log_to.split(",") if name.strip()))


def tag(key: str) -> str:
    """The name a metrics.jsonl key is logged under."""
    return f"held_out/{key[len('eval_') :]}" if key.startswith("eval_") else f"train/{key}"


def scalars(record: Mapping[str, object]) -> dict[str, float]:
    """A metrics.jsonl record's figures (a JSON object, as written or read back), by logged
    name."""
    return {
        tag(key): float(value)
        for key, value in record.items()
        if key not in NOT_SCALARS and isinstance(value, int | float)
    }


def check(config: Config) -> None:
    """Refuse, before anything is written, loggers whose library is not installed or
    whose folder cannot be written."""
    for name in names(config.train.log_to):
        require(name, f"train.log_to={name}")
        folder = os.environ.get("WANDB_DIR") if name == "wandb" else None
        if folder and not (Path(folder).is_dir() and os.access(folder, os.W_OK)):
            raise JabError(f"WANDB_DIR={folder} is not a folder W&B can write to")


def require(name: str, what: str) -> None:
    """Refuse `what` when the library logger `name` writes with is not installed."""
    module, extra = EXTRAS[name]
    if importlib.util.find_spec(module) is None:
        raise JabError(f"{what} needs {module}, which is not installed: {install(extra)}")


class Writer(Protocol):
    """One logger's writer for one seed (`TensorBoard`, `WandB`)."""

    def where(self, group: Path | None) -> str:
        """Where the logs go, in a line for the user."""
        ...

    def log(self, record: LogRecord) -> None: ...

    def evaluated(self, result: HeldOutResult) -> None: ...

    def close(self) -> None: ...


class Logs:
    """The open loggers of a training session: one writer per logger and seed."""

    def __init__(self, warn: Callable[[str], None]) -> None:
        self.writers: list[tuple[str, int, Writer]] = []  # logger, seed's index, writer
        self.warn = warn

    @classmethod
    def open(
        cls,
        config: Config,
        runs: list[Run],
        group: Path | None,
        start_step: int,
        warn: Callable[[str], None],
    ) -> Logs:
        """Loggers for `runs` (each seed's Run), starting or resuming at `start_step`;
        `group` is their group's folder, None for a plain run."""
        logs = cls(warn)
        try:
            for name in names(config.train.log_to):
                for n, run in enumerate(runs):
                    writer = WRITERS[name](run, group, start_step)
                    logs.writers.append((name, n, writer))
                warn(writer.where(group))
        except Exception as err:
            logs.close()
            raise JabError(f"train.log_to={name}: cannot start logging: {err}") from err
        return logs

    def _each(self, call: Callable[[int, Writer], None]) -> None:
        for entry in list(self.writers):
            name, n, writer = entry
            try:
                call(n, writer)
            except Exception as err:
                self.writers.remove(entry)
                self.warn(f"warning: {name} logging stopped ({err}); training goes on")

    def log(self, records: list[LogRecord]) -> None:
        self._each(lambda n, writer: writer.log(records[n]))

    def evaluated(self, results: list[HeldOutResult]) -> None:
        self._each(lambda n, writer: writer.evaluated(results[n]))

    def close(self) -> None:
        self._each(lambda n, writer: writer.close())
        self.writers = []


class TensorBoard:
    """Event files in the run folder, written by tensorboardX (no TensorFlow needed)."""

    def __init__(self, run: Run, group: Path | None, start_step: int) -> None:
        from tensorboardX import SummaryWriter

        # A resumed run's events after its checkpoint are dropped by TensorBoard.
        purge = start_step + 1 if start_step > 0 else None
        # An event file is named by the second it opens in: a resume within the same second
        # as its run would reopen, and empty, the run's file. The step it starts from tells
        # them apart, padded so that TensorBoard reads them in their order.
        self.writer = SummaryWriter(
            logdir=str(run.path),
            purge_step=purge,
            flush_secs=30,
            filename_suffix=f".from-step-{start_step:09d}",
        )
        self.path = run.path

    def where(self, group: Path | None) -> str:
        return f"Logging to TensorBoard: tensorboard --logdir {group or self.path}"

    def log(self, record: LogRecord) -> None:
        for name, value in scalars(record.to_json()).items():
            self.writer.add_scalar(name, value, record.step)
        self.writer.flush()

    def evaluated(self, result: HeldOutResult) -> None:
        pass  # its figures arrive with the record of the same step

    def close(self) -> None:
        self.writer.close()


class WandB:
    """A W&B run per seed; W&B's own environment (WANDB_PROJECT, WANDB_ENTITY,
    WANDB_MODE, WANDB_API_KEY) says where it goes. A resumed run continues its W&B run,
    whose id the run folder keeps (`ID_FILE`)."""

    def __init__(self, run: Run, group: Path | None, start_step: int) -> None:
        import wandb

        from jabcli.runs.runs import atomic_write

        folder = Path(os.environ.get("WANDB_DIR") or run.path)
        saved = run.path / ID_FILE
        previous = saved.read_text().strip() if start_step > 0 and saved.is_file() else None
        run_id = previous or secrets.token_hex(4)  # as W&B's own: 8 of [0-9a-z]
        if previous is None:
            atomic_write(saved, run_id.encode())
        config, _ = run.load_config()
        self.run = wandb.init(
            dir=str(folder),
            id=run_id,
            resume="allow",
            name=str(run.path),
            group=str(group) if group is not None else None,
            config=config.to_dict(),
            reinit="create_new",
            settings=wandb.Settings(console="off", x_disable_stats=True, silent=True),
        )
        self.last: HeldOutResult | None = None

    def where(self, group: Path | None) -> str:
        if self.run.settings.mode == "offline" or not self.run.url:
            folder = Path(self.run.dir).parent.parent  # wandb/offline-run-DATE-ID/files
            seeds = ", one W&B run per seed" if group is not None else ""
            return f"Logging to W&B offline in {folder}{seeds} (wandb sync uploads it)"
        return f"Logging to W&B: {self.run.url}" + (" (and the other seeds)" if group else "")

    def log(self, record: LogRecord) -> None:
        self.run.log(scalars(record.to_json()), step=record.step)

    def evaluated(self, result: HeldOutResult) -> None:
        self.last = result

    def close(self) -> None:
        import wandb

        if self.last is not None:
            columns = ["length", "samples", "token_acc", "seq_acc"]
            rows = [
                [length, row["samples"], row["token_acc"], row["seq_acc"]]
                for length, row in sorted(self.last.scores["per_length"].items())
            ]
            names: list[str | int] = list(columns)  # W&B's column keys; its Table keeps them
            self.run.log({"held_out/per_length": wandb.Table(columns=names, data=rows)})
            self.run.summary["held_out/step"] = self.last.step
        self.run.finish()


WRITERS: dict[str, Callable[[Run, Path | None, int], Writer]] = {
    "tensorboard": TensorBoard,
    "wandb": WandB,
}


def metrics_to_export(run) -> list[dict[str, Any]]:
    """A run's metrics.jsonl records, checked to be there and the run not training: what
    `export_tensorboard` writes, asked of every run before any is written."""
    run.check_not_running()
    records = run.read_metrics()
    if not records:
        raise JabError(f"{run.path} has no metrics yet: nothing to export")
    return records


def export_tensorboard(run, records: list[dict[str, Any]]) -> list[Path]:
    """Write a run's metrics.jsonl `records` (`metrics_to_export`) as TensorBoard event
    files in its folder, replacing event files written before; returns the files
    written. Written aside and moved in, so an interrupted export leaves the old files or
    the new ones, whole."""
    from tensorboardX import SummaryWriter

    from jabcli.runs.runs import describe

    try:
        with run.lock(), tempfile.TemporaryDirectory(dir=run.path, prefix=".export-") as aside:
            writer = SummaryWriter(logdir=aside)
            for record in records:
                for name, value in scalars(record).items():
                    writer.add_scalar(name, value, record["step"])
            writer.close()
            for old in run.path.glob("events.out.tfevents.*"):
                old.unlink()
            written = []
            for new in Path(aside).glob("events.out.tfevents.*"):
                written.append(Path(shutil.move(new, run.path / new.name)))
    except OSError as err:
        raise JabError(
            f"could not write TensorBoard events into {run.path}: {describe(err)}"
        ) from None
    return written
