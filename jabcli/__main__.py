"""The `jab` process: `python -m jabcli` and the `jab` script start here.

Ctrl-C is taken over before anything heavy is imported. Until a command says otherwise
(training saves a checkpoint on Ctrl-C, see session.py), it ends the process at once with
one line and exit 130: a KeyboardInterrupt raised inside the import of a compiled extension
or an interpreter callback can crash the process or be swallowed, and the commands that do
not train write nothing that an interrupt could leave half-written.

Python's garbage collection waits until JAX is imported (`runtime.hold_collections`), and
at the end, the objects left are kept out of its last collections (`gc.freeze`): walking
JAX's alone took 0.3-0.6 s of every command's exit, and jab leaves nothing for them to
finish, as it closes every file it writes.
"""

import gc
import signal


def main() -> None:
    from jabcli.cli.interrupt import on_sigint

    signal.signal(signal.SIGINT, on_sigint)
    from jabcli.core import runtime

    runtime.hold_collections()
    from jabcli.cli.cli import main as cli_main

    try:
        cli_main()
    finally:
        gc.freeze()


if __name__ == "__main__":
    main()
