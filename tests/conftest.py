import atexit
import os
import shutil
import tempfile

import pytest

# Subprocesses of one test session share a fresh compilation cache, so the same tiny model
# is compiled once rather than in every test; the user's own cache is never touched, and
# this one goes when the session does.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="jab-test-cache-")
atexit.register(shutil.rmtree, os.environ["XDG_CACHE_HOME"], ignore_errors=True)
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
