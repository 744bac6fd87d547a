"""Every `--json` a command prints, pinned on fixed runs: the session's tiny run and the
smoke study's cells (groups of two seeds). A script reading jab's JSON keeps working
whatever jab's code becomes; only what legitimately varies is left out (timings, dates,
the folder the tests ran in, and the value of every float: an accuracy after 300 steps
is a fact about this machine's floating-point rounding, its key and type are jab's).

After a deliberate change of a JSON shape, write the pins again with
`JAB_PIN_JSON=1 pytest tests/cli/test_json.py` and read the diff of tests/cli/json/."""

import json
import os
from pathlib import Path

import pytest
from jabrun import jab_here

PINS = Path(__file__).parent / "json"
VARIES = ("created", "train_s", "eval_s", "elapsed_s", "steps_per_sec")
LENGTHS = ["--lengths", "1-6", "--samples", "5"]
CELL = "runs/smoke/copy-randomized"  # a group of two seeds

COMMANDS = {
    "tasks": ("trained", ["tasks"]),
    "runs": ("trained", ["runs"]),
    "runs-of-a-study": ("smoke", ["runs", "runs/smoke"]),
    "eval": ("trained", ["eval", "--run", "runs/tiny", "--samples", "20"]),
    "eval-by-length-forced": (
        "trained",
        ["eval", "--run", "runs/tiny", *LENGTHS, "--force-length", "--checkpoint", "200"],
    ),
    "eval-of-a-group": ("smoke", ["eval", "--run", CELL, *LENGTHS, "--force-length"]),
    "compare": ("smoke", ["compare", CELL, "runs/smoke/reverse-randomized", *LENGTHS]),
    "study-show": ("smoke", ["study", "show", "runs/smoke"]),
    "study-show-token-bins": (
        "smoke",
        ["study", "show", "runs/smoke", "--metric", "token_acc", "--bins", "1-3,4-8"],
    ),
}


def normalised(value, cwd: str):
    """`value` with timings and dates as "<varies>", floats as "<float>" and the test's
    folder as "<cwd>"."""
    if isinstance(value, dict):
        return {
            k: "<varies>" if k in VARIES and v is not None else normalised(v, cwd)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [normalised(v, cwd) for v in value]
    if isinstance(value, str):
        return value.replace(cwd, "<cwd>")
    if isinstance(value, float):
        return "<float>"
    return value


@pytest.mark.parametrize("name", COMMANDS)
def test_every_json_output_is_as_pinned(name, trained, smoke):
    folder, args = COMMANDS[name]
    cwd = trained if folder == "trained" else smoke[0]
    out = json.loads(jab_here(*args, "--json", cwd=cwd).stdout)
    if args[0] == "runs":  # newest first: runs made in the same second come in either order
        out = sorted(out, key=lambda row: row["run"])
    got = json.dumps(normalised(out, str(cwd)), indent=1, sort_keys=False) + "\n"
    pin = PINS / f"{name}.json"
    if os.environ.get("JAB_PIN_JSON") == "1":
        PINS.mkdir(exist_ok=True)
        pin.write_text(got)
    assert got == pin.read_text(), f"jab {' '.join(args)} --json changed; see {pin}"
