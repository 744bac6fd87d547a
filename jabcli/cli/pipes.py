"""Standard output whose reader may go away (`jab tasks | head -1`, `less` quit early):
jab then stops writing and goes on with its work, and exits 0 as other Unix tools do. A
training run piped that way trains on to its end and is saved as usual, rather than dying
of a broken pipe and losing the run. Whatever its encoding cannot write is written as
ASCII stand-ins (stand_ins.py)."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from typing import TextIO

from jabcli.cli.stand_ins import encodable


class QuietStdout(io.TextIOBase):
    """sys.stdout as it was when made, quiet from the moment its reader is gone, and
    writing what its encoding lacks as ASCII stand-ins."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream
        self.gone = False

    @property
    def target(self) -> TextIO:
        return self.stream if self.stream is not None else sys.stdout

    def write(self, text: str) -> int:
        if not self.gone:
            target = self.target
            try:
                target.write(encodable(text, getattr(target, "encoding", None)))
            except BrokenPipeError:
                self.reader_gone()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.target.flush()
            except BrokenPipeError:
                self.reader_gone()

    def reader_gone(self) -> None:
        self.gone = True
        reader_gone()

    def isatty(self) -> bool:
        return self.target.isatty()

    def fileno(self) -> int:
        return self.target.fileno()

    # utf-8: it writes any text, what the target cannot encode as stand-ins (so that Rich
    # draws its boxes as it would for a terminal, and they keep their shape).
    encoding = "utf-8"


def reader_gone() -> None:
    """Point stdout at /dev/null, so that nothing later (nor Python's exit) writes to the
    closed pipe."""
    with contextlib.suppress(OSError, ValueError):
        assert sys.__stdout__ is not None  # the stdout whose reader went away
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno())
        os.close(devnull)
