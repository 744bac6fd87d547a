"""The `jab` process: `python -m jabcli` and the `jab` script start here.

Ctrl-C is taken over before anything heavy is imported. Until a command says otherwise
(training saves a checkpoint on Ctrl-C, see session.py), it ends the process at once with
one line and exit 130: a KeyboardInterrupt raised inside the import of a compiled extension
or an interpreter callback can crash the process or be swallowed, and the commands that do
not train write nothing that an interrupt could leave half-written.
"""

import os
import signal
import sys

INTERRUPTED = 128 + signal.SIGINT


def interrupted(said: str = "") -> None:
    """Say so in one line and exit 130 at once: not through sys.exit, whose exit handlers
    would wait for (or crash on) a computation still running. `said`: what became of
    the run."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a write of the main program was cut: nothing more to save
            pass
    line = f"jab: error: interrupted; {said}" if said else "jab: error: interrupted"
    os.write(2, (" ".join(line.split()) + "\n").encode())
    os._exit(INTERRUPTED)


def on_sigint(signum, frame) -> None:
    interrupted()


def main() -> None:
    signal.signal(signal.SIGINT, on_sigint)
    from jabcli.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
