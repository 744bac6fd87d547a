"""Ctrl-C: one line on stderr and exit 130, at once, whatever jab is doing.

Installed before anything heavy is imported (see __main__.py); training replaces it with
its own handler while it runs (session.StopRequest) and calls `interrupted` to say what
became of the run.
"""

import os
import signal
import sys
from typing import NoReturn

INTERRUPTED = 128 + signal.SIGINT


def interrupted(said: str = "") -> NoReturn:
    """Say so in one line and exit 130 at once: not through sys.exit, whose exit handlers
    would wait for (or crash on) a computation still running. `said`: what became of
    the run."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a write of the main program was cut: nothing more to save
            pass
    line = f"jab: error: interrupted; {said}" if said else "jab: error: interrupted"
    if os.isatty(1):  # a live view hides the cursor until it ends: give it back
        os.write(1, b"\x1b[?25h")
    os.write(2, (" ".join(line.split()) + "\n").encode())
    os._exit(INTERRUPTED)


def on_sigint(signum, frame) -> None:
    interrupted()
