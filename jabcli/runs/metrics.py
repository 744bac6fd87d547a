"""A run's metrics.jsonl: one `LogRecord` a line, as training makes them, and the file read
back, its records as JSON objects (written by this jab or an older one) and its unreadable
lines (a resume sets those aside in metrics.rejected.jsonl). A kill can cut only the line
being appended, so a torn last line is no damage."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jabcli.core.errors import JabError
from jabcli.runs.files import describe


@dataclass(frozen=True)
class LogRecord:
    """One seed's figures at a log step (a metrics.jsonl line): the training batches' loss,
    token accuracy, exact match and gradient norm, each the mean over the steps since the
    last record; the learning rate the last of them applied; the speed and the seconds
    since the session began; at an evaluation step, the held-out figures too."""

    step: int
    loss: float
    token_acc: float
    seq_acc: float
    grad_norm: float
    lr: float
    steps_per_sec: float
    elapsed_s: float
    eval_token_acc: float | None = None  # only at an evaluation step
    eval_seq_acc: float | None = None

    def to_json(self) -> dict[str, float]:
        """As metrics.jsonl keeps it: the held-out figures only where there are some."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


def metrics_lines(path: Path) -> tuple[list[dict[str, Any]], list[bytes]]:
    """The records of a metrics.jsonl file and its unreadable lines, except a torn last
    one: a kill can cut only the line being appended, which then lacks its newline."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], []
    except OSError as err:
        raise JabError(f"could not read {path}: {describe(err)}") from None
    lines = data.split(b"\n")
    torn = lines.pop()  # b"" when the file ends with a newline, as it should
    records, rejected = [], []
    for line in lines:
        record = metrics_record(line)
        if record is not None:
            records.append(record)
        elif line.strip():
            rejected.append(line)
    last = metrics_record(torn)  # kept when whole: only its newline was lost
    if last is not None:
        records.append(last)
    return records, rejected


def metrics_record(line: bytes) -> dict[str, Any] | None:
    """One metrics record, or None when the line is not one."""
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    is_step = isinstance(record, dict) and type(record.get("step")) is int
    return record if is_step else None
