"""What tests do to a run on disk, as a full disk, a bad copy or a hand edit leaves it."""

import json
from pathlib import Path

import yaml


def newest_step(run: Path) -> int:
    return json.loads((run / "checkpoints/manifest.json").read_text())["checkpoints"][-1]["step"]


def truncate(run: Path, step: int) -> bytes:
    """Cut a checkpoint short, as a full disk or a bad copy leaves it; its bytes before."""
    path = run / "checkpoints" / f"step-{step:08d}.npz"
    before = path.read_bytes()
    path.write_bytes(before[:1000])
    return before


def edit_config(run: Path, change) -> None:
    config = yaml.safe_load((run / "config.yaml").read_text())
    change(config)
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
