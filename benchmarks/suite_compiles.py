"""Where the test suite's time goes in JAX: tracing, lowering and XLA compilation, by
program and by test (issue 41's suite goal).

    python benchmarks/suite_compiles.py [PYTEST ARGS...]     # default: -q -n 2

Runs the suite as CI does (`python -m pytest -q -n 2 -p no:cacheprovider`) with this file
loaded as a pytest plugin in every worker. Each worker listens to JAX's own records: the
duration events of `jax.monitoring` (tracing, lowering, backend compilation, cache
retrievals) and the DEBUG lines that name each compiled program and its compilation
seconds. When the suite ends, it prints the suite's wall time and three tables: the
totals by event, the programs that cost most to compile (their count and seconds), and
the tests that compiled most. Subprocesses (`jab` started by a test, a study's worker
processes, the notebook's kernel) are not counted: only what the pytest workers compile.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = "JAB_SUITE_COMPILES"  # the folder each worker writes its totals to
FINISHED = re.compile(r"Finished XLA compilation of (.+?) in ([0-9.e-]+) sec")


# The plugin: loaded in each pytest process by `-p suite_compiles`.

events: collections.Counter = collections.Counter()
event_counts: collections.Counter = collections.Counter()
programs: collections.Counter = collections.Counter()
program_counts: collections.Counter = collections.Counter()
tests: collections.Counter = collections.Counter()
current = ["(collection)"]


class _Compiled(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        found = FINISHED.search(record.getMessage())
        if found:
            programs[found[1]] += float(found[2])
            program_counts[found[1]] += 1
            tests[current[0]] += float(found[2])


def listening(config) -> bool:
    """In a pytest process that runs tests: an xdist worker, or pytest without workers
    (xdist's controller only hands tests out)."""
    controller = getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput")
    return bool(os.environ.get(OUT)) and not controller


def pytest_configure(config) -> None:
    if not listening(config):
        return
    import jax.monitoring

    def on_duration(name: str, seconds: float, **_) -> None:
        events[name] += seconds
        event_counts[name] += 1

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    handler = _Compiled(logging.DEBUG)
    # JAX writes the line at DEBUG (WARNING with jax_log_compiles, which tests would see).
    for name in ("jax._src.dispatch", "jax._src.interpreters.pxla"):
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False


def pytest_runtest_logstart(nodeid, location) -> None:
    current[0] = nodeid


def pytest_unconfigure(config) -> None:
    if not listening(config):
        return
    record = {
        "events": [[k, v, event_counts[k]] for k, v in events.items()],
        "programs": [[k, v, program_counts[k]] for k, v in programs.items()],
        "tests": list(tests.items()),
    }
    (Path(os.environ[OUT]) / f"{os.getpid()}.json").write_text(json.dumps(record))


# The script.


def main() -> None:
    args = sys.argv[1:] or ["-q", "-n", "2"]
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as out:
        env = {
            **os.environ,
            OUT: out,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(root / "benchmarks"),
                                                        os.environ.get("PYTHONPATH")])),
        }  # fmt: skip
        start = time.perf_counter()
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                   "-p", "suite_compiles", *args]  # fmt: skip
        ended = subprocess.run(command, cwd=root, env=env)
        wall = time.perf_counter() - start
        totals = [json.loads(p.read_text()) for p in Path(out).glob("*.json")]

    def summed(key: str) -> tuple[collections.Counter, collections.Counter]:
        seconds, counts = collections.Counter(), collections.Counter()
        for worker in totals:
            for name, value, *count in worker[key]:
                seconds[name] += value
                counts[name] += count[0] if count else 1
        return seconds, counts

    print(f"\nsuite: {wall:.0f} s wall, exit {ended.returncode}, {len(totals)} test processes")
    seconds, counts = summed("events")
    print("\n| JAX event (pytest workers) | seconds | count |\n|---|---:|---:|")
    for name, value in seconds.most_common(8):
        print(f"| {name} | {value:.1f} | {counts[name]} |")
    seconds, counts = summed("programs")
    print("\n| program | compile s | compiles |\n|---|---:|---:|")
    for name, value in seconds.most_common(12):
        print(f"| {name} | {value:.1f} | {counts[name]} |")
    seconds, _ = summed("tests")
    print("\n| test | compile s |\n|---|---:|")
    for name, value in seconds.most_common(12):
        print(f"| {name} | {value:.1f} |")
    sys.exit(ended.returncode)


if __name__ == "__main__":
    main()
