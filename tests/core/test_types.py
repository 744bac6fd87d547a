"""The type checker's word on jab's own code: the records that pass between modules say
what they hold, and mypy (configured in pyproject.toml) holds every module to them."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_jab_type_checks_clean(request, tmp_path):
    # kept between sessions in pytest's cache (a first check takes 20 s, a later one checks
    # what changed); a fresh folder where that cache is off (`-p no:cacheprovider`)
    kept = getattr(request.config, "cache", None)
    cache = kept.mkdir("mypy") if kept is not None else tmp_path
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
