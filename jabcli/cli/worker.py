"""A study cell's worker process: `python -m jabcli.cli.worker STUDY_DIR CELL` runs
`cell_job.work` on one cell. Its events go to stdout as JSON lines for the driver, notes
and errors to stderr (the study's logs/ folder), one line each; its exit status says how
it ended (0 measured, 130/143 interrupted, 1 failed)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path


def main() -> None:
    from jabcli.cli.interrupt import on_sigint

    signal.signal(signal.SIGINT, on_sigint)  # until training takes Ctrl-C over
    # A Ray worker blocks SIGINT, and a process it starts inherits the mask: the driver's
    # Ctrl-C, passed on, would never arrive.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    from jabcli.cli.pipes import QuietStdout
    from jabcli.core.errors import JabError
    from jabcli.studies.cell_job import work
    from jabcli.studies.events import WorkerEvent
    from jabcli.studies.local import die_with_parent

    die_with_parent()
    sys.stdout = QuietStdout(sys.stdout)  # a driver gone is no reason to lose the cell
    out, folder = Path(sys.argv[1]), sys.argv[2]

    def emit(event: WorkerEvent) -> None:
        if event.event == "note":
            print(event.message, file=sys.stderr, flush=True)
        else:
            print(event.to_json(), flush=True)

    try:
        code = work(out, folder, emit)
    except JabError as err:
        print(f"jab: error: {' '.join(str(err).split())}", file=sys.stderr, flush=True)
        code = 1
    except KeyboardInterrupt:
        print("jab: error: interrupted", file=sys.stderr, flush=True)
        code = 128 + signal.SIGINT
    except Exception as err:
        if "RESOURCE_EXHAUSTED" not in str(err):
            raise
        line = str(err).splitlines()[0][:300]
        print(f"jab: error: out of memory: {line}", file=sys.stderr, flush=True)
        code = 1
    sys.stdout.flush()
    os._exit(code)  # not sys.exit: no exit handler waits on a computation still running


if __name__ == "__main__":
    main()
