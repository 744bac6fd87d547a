"""Writing a file whole or not at all, and what an OSError means, in words a user reads."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

from jabcli.core.errors import JabError


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:  # also a second Ctrl-C: never leave the temporary behind
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(err, OSError):
            raise JabError(f"could not write {path}: {describe(err)}") from None
        raise


def describe(err: OSError) -> str:
    if err.errno == errno.ENOSPC:
        return "the disk is full"
    if err.errno == errno.EROFS:
        return "read-only file system"
    if err.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return err.strerror or str(err)
