import atexit
import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

# What the kept cache's XLA programs and jab's facts about models may take (jab trims its
# stored programs itself): each new model compiles its own, each version of jab's code
# finds its facts anew, and what was written longest ago is of least use.
KEPT_BYTES = {"xla": 256 * 2**20, "facts": 16 * 2**20}


def kept_cache() -> str:
    """The suite's kept cache folder, trimmed to KEPT_BYTES, what was written longest ago
    removed first."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "jab-tests"
    for kind, most in KEPT_BYTES.items():
        written = []
        for f in (base / "jab" / kind).glob("*"):
            with contextlib.suppress(OSError):  # (another session removing it meanwhile)
                written.append((f.stat().st_mtime, f.stat().st_size, f))
        total = 0
        for _, size, f in sorted(written, reverse=True):  # the newest first
            total += size
            if total > most:
                with contextlib.suppress(OSError):
                    f.unlink()
    return str(base)


# The processes of a test session (pytest-xdist's workers, which inherit the first
# process's environment, and their subprocesses) share one compilation cache, so the same
# tiny model is compiled once rather than in every test and every worker. It is kept
# between sessions, as pip keeps its downloads, in a folder of its own (never the user's
# jab cache): a session after the first compiles only what changed (a cold session takes
# about 1.7 times as long; after a change to jab's code, 1.3 times: it traces again).
# JAB_TEST_CACHE=fresh runs the suite cold, in a cache made for it and removed at its
# end; JAB_TEST_CACHE=FOLDER uses that folder.
if os.environ.get("JAB_TEST_CACHE", "") in ("", "fresh"):  # the session's first process
    if os.environ.get("JAB_TEST_CACHE") == "fresh":
        os.environ["JAB_TEST_CACHE"] = tempfile.mkdtemp(prefix="jab-test-cache-")
        atexit.register(shutil.rmtree, os.environ["JAB_TEST_CACHE"], ignore_errors=True)
    else:
        os.environ["JAB_TEST_CACHE"] = kept_cache()
os.environ["XDG_CACHE_HOME"] = os.environ["JAB_TEST_CACHE"]
# The suite starts some sixty Python processes that import jab (commands, study workers,
# a notebook's kernel). Where the environment says PYTHONDONTWRITEBYTECODE (this CI's
# machine does), each compiled jab's source afresh, 0.3 s a start: they write its
# bytecode as Python does by default (in __pycache__ folders, which git ignores). (Not
# in a PYTHONPYCACHEPREFIX folder: there a fresh virtual environment's libraries would
# be compiled again too, pip having written theirs beside them.)
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
# The suite compiles thousands of tiny programs and runs each for milliseconds: XLA's
# backend optimizations and its newer fusion emitters cost it more than they save (they
# halve the compile time of a tiny model's training chunk, 3.4 s to 1.7 s). What the tests
# check (equal answers, bit-equal resumes) holds with either.
FAST_COMPILE = "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {FAST_COMPILE}".strip()
os.environ.pop("JAB_NO_CACHE", None)
os.environ["NO_COLOR"] = "1"  # as env() gives subprocesses; before display.console exists
os.environ.pop("JAB_DEBUG", None)  # in-process calls (jab_here) too print one line, no traceback

# In-process tests compile through the same cache as the subprocesses and the other worker
# (the command line turns it on the same way, for the whole process, on its first call).
from jabcli.core import runtime  # noqa: E402  (after XLA_FLAGS and the cache folder are set)

runtime.configure()


def exit_at_once() -> None:
    """A pytest-xdist worker at its exit, its results with the first process: JAX's own
    exit handler, which would run next, frees every program the worker compiled (some
    thousands), 2-3 s at the end of every session that nothing waits for."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if os.environ.get("PYTEST_XDIST_WORKER"):
    atexit.register(exit_at_once)  # after JAX's (imported by `configure`): it runs first


@pytest.fixture(scope="session")
def trained(tmp_path_factory, worker_id):
    """A folder holding runs/tiny: a tiny copy model trained for 300 steps by `jab train`
    (shared by the session's workers: tests write nothing under its runs/), run in this
    process, which then holds its compiled programs."""
    from jabrun import TINY, jab_here, once

    def train(cwd: Path) -> str:
        return jab_here("train", *TINY, "--steps", "300", "--out", "runs/tiny", cwd=cwd).stdout

    return once(tmp_path_factory, worker_id, "trained", train)[0]


@pytest.fixture
def three_checkpoints(trained, tmp_path) -> Path:
    """A copy of the session's tiny run: TINY for 300 steps, checkpoints at 100, 200, 300."""
    shutil.copytree(trained / "runs" / "tiny", tmp_path / "run")
    return tmp_path


@pytest.fixture(scope="session")
def smoke(tmp_path_factory, worker_id):
    """The smoke study's two cells (jabrun.SMOKE_TEXT) run by `jab study run` into
    runs/smoke of a fresh folder, once for the whole session, and what it printed."""
    from jabrun import SMOKE_TEXT, jab_here, once

    def run(cwd: Path) -> str:
        (cwd / "smoke.yaml").write_text(SMOKE_TEXT)
        return jab_here("study", "run", cwd / "smoke.yaml", cwd=cwd).stdout

    return once(tmp_path_factory, worker_id, "smoke-study", run)


# pytest-xdist hands out whole files (--dist loadfile, pyproject.toml) in the order of
# their tests: the longest first (seconds of one warm session on the idle 2-core machine,
# the two workers side by side: a study's worker processes and Ray clusters, the models'
# compilations, ...), so that the two workers end together rather than one waiting on
# the other's last long file. Files not named here come after.
LONGEST_FIRST = (
    "test_ray_backend.py",  # 33, most of it waiting for Ray's processes: begun first
    "test_user_code.py",  # 37
    "test_cli.py",  # 31
    "test_training.py",  # 30
    "test_study.py",  # 26
    "test_length_buckets.py",  # 26
    "test_decode.py",  # 21
    "test_types.py",  # 20 where mypy's cache is cold, else 1 (tests/core/test_types.py)
    "test_recurrent.py",  # 20
    "test_model.py",  # 16
    "test_program_store.py",  # 15
    "test_tasks.py",  # 12
    "test_seeds.py",  # 10
    "test_file_task.py",  # 9.5
    "test_paper_model.py",  # 9.2
    "test_logging.py",  # 9.1
    "test_api.py",  # 8.0
    "test_positions.py",  # 7.5
    "test_sharding.py",  # 7.1
    "test_packing.py",  # 6.0
    "test_runs.py",  # 5.4
    "test_notebook.py",  # 5.3
    "test_layout.py",  # 4.1
    "test_scratchpad.py",  # 3.6
    "test_bad_input.py",  # 3.6
    "test_checkpoints.py",  # 3.2
    "test_cli_pinned.py",  # 1.8
    "test_devices.py",  # 1.4
    "test_docs.py",  # 1.2
    "test_json.py",  # 1.2
)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable otherwise
