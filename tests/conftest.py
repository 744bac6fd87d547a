import atexit
import os
import shutil
import tempfile

import pytest

# The processes of one test session (pytest-xdist's workers, which inherit the first
# process's environment, and their subprocesses) share a fresh compilation cache, so the
# same tiny model is compiled once rather than in every test and every worker; the user's
# own cache is never touched, and this one goes when the process that made it ends.
if not os.environ.get("JAB_TEST_CACHE"):
    os.environ["JAB_TEST_CACHE"] = tempfile.mkdtemp(prefix="jab-test-cache-")
    atexit.register(shutil.rmtree, os.environ["JAB_TEST_CACHE"], ignore_errors=True)
os.environ["XDG_CACHE_HOME"] = os.environ["JAB_TEST_CACHE"]
# The suite compiles hundreds of tiny programs and runs each for milliseconds: XLA's
# backend optimizations cost it more than they save (a third of a training test's time).
# What the tests check (equal answers, bit-equal resumes) holds at either level.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
    ).strip()
os.environ.pop("JAB_NO_CACHE", None)
os.environ["NO_COLOR"] = "1"  # as env() gives subprocesses; before display.console exists
os.environ.pop("JAB_DEBUG", None)  # in-process calls (jab_here) too print one line, no traceback


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """A folder holding runs/tiny: a tiny copy model trained for 300 steps by `jab train`."""
    from jabrun import TINY, jab

    cwd = tmp_path_factory.mktemp("work")
    jab("train", *TINY, "--steps", "300", "--out", "runs/tiny", cwd=cwd)
    return cwd
