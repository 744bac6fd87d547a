"""A run's metrics.jsonl read back: its records, one JSON object per log step, and its
unreadable lines (a resume sets those aside in metrics.rejected.jsonl). A kill can cut
only the line being appended, so a torn last line is no damage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jabcli.core.errors import JabError
from jabcli.runs.files import describe


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
