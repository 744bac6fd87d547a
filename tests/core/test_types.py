"""The type checker's word on jab's own code: the records that pass between modules say
what they hold, and mypy (configured in pyproject.toml) holds every module to them."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_jab_type_checks_clean():
    # mypy's cache is kept with the suite's compilation cache (tests/conftest.py), between
    # sessions and clones: a first check takes 20 s, a later one checks what changed
    cache = Path(os.environ["JAB_TEST_CACHE"]) / "mypy"
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
