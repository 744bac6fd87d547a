"""Every mistake a user can make gets one clear line on stderr, exit code 2, no traceback,
and leaves runs/ exactly as it was."""

import errno
import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from jabrun import env, jab, jab_here

from jabcli.core.errors import JabError
from jabcli.runs import runs

RUN = "runs/tiny"


CASES = {
    "unknown task": (["train", "--task", "revers"], "valid tasks: copy, reverse, duplicate"),
    "missing task file": (["train", "--task", "nothere.yaml"], "does not exist"),
    "task file that is not YAML": (
        ["train", "--task", "broken.yaml"],
        "broken.yaml is not valid YAML (at its end: something left open)",
    ),
    "a folder given as the config": (
        ["train", "--task", "copy", "--config", "others"],
        "others is a folder, not a YAML file",
    ),
    "a section set as a key": (
        ["train", "--task", "copy", "--set", "model=3"],
        "'model' in --set is a config section: set one of its keys (model.d_model,",
    ),
    "a key by its initials": (
        ["train", "--task", "copy", "--set", "train.lr=0.1"],
        "(did you mean 'train.learning_rate'?)",
    ),
    "a file as the output folder": (
        ["train", "--task", "copy", "--out", "afile"],
        "afile is a file; choose another --out",
    ),
    "config key of the wrong type": (
        ["train", "--config", "wrongtype.yaml"],
        "'model.d_model' must be int, got str 'wide' in wrongtype.yaml",
    ),
    "misspelled key": (
        ["train", "--task", "copy", "--set", "model.d_modle=64"],
        "did you mean 'model.d_model'",
    ),
    "an option the task does not take": (
        ["train", "--task", "copy", "--set", "task.modulus=7"],
        "task copy takes no task.modulus (from --set); it has no options of its own",
    ),
    "an option the task does not take, in a task file": (
        ["train", "--task", "copymod.yaml"],
        "task copy takes no task.modulus (from copymod.yaml); it has no options of its own",
    ),
    "negative steps": (["train", "--task", "copy", "--steps", "-5"], "'--steps'"),
    "steps beyond any budget": (
        ["train", "--task", "copy", "--steps", "99999999999999999999"],
        "'--steps'",
    ),
    "task YAML that names no task": (["train", "--task", "noname.yaml"], "names no task"),
    "zero samples": (["eval", "--run", RUN, "--samples", "0"], "'--samples'"),
    "seed out of range": (["eval", "--run", RUN, "--seed", "-1"], "'--seed'"),
    "unknown attention kind": (["show-attention", "--run", RUN, "--kind", "self"], "'--kind'"),
    "a run folder without --resume": (["train", "runs/tiny"], "--resume runs/tiny"),
    "an evaluation too big for memory": (
        ["eval", "--run", RUN, "--samples", "100000000"],
        "of memory, but only",
    ),
    "set without equals": (["train", "--task", "copy", "--set", "model.d_model"], "key=value"),
    "mistyped option": (["train", "--tsk", "copy"], "--tsk"),
    "unknown command": (["trian"], "trian"),
    "missing run folder": (["eval", "--run", "runs/nothere"], "does not exist"),
    "a file given as the run": (["eval", "--run", "afile"], "afile is a file, not a run folder"),
    "a mistyped folder of runs": (["runs", "rnus"], "rnus does not exist: no folder of runs"),
    "a word for a number": (
        ["train", "--task", "copy", "--steps", "abc"],
        "Invalid value for '--steps': expected a whole number",
    ),
    "a number too small": (["eval", "--samples", "0"], "'--samples': must be at least 1"),
    "an option without its value": (
        ["study", "run", "s.yaml", "--ray"],
        "'--ray' requires an argument (see 'jab study run --help')",
    ),
    "empty run folder": (["eval", "--run", "others/empty"], "not a jab run"),
    "folder that is not a run": (["eval", "--run", "notarun"], "not a jab run"),
    "a study given as a run": (
        ["eval", "--run", "astudy"],
        "astudy is a study, not a run: see it with jab study show astudy",
    ),
    "run from an incompatible version": (
        ["eval", "--run", "others/future"],
        "incompatible version",
    ),
    "characters outside the alphabet": (["predict", "--run", RUN, "12x"], "outside the alphabet"),
    "empty input": (["predict", "--run", RUN, " "], "empty"),
    "input too long": (["predict", "--run", RUN, "0" * 1100], "the model takes at most"),
    "eval lengths beyond the model": (
        ["eval", "--run", RUN, "--lengths", "1-2000"],
        "model.max_positions = 1024",
    ),
    "malformed lengths": (["eval", "--run", RUN, "--lengths", "5-x"], "--lengths takes a range"),
    "a length of 0": (["eval", "--run", RUN, "--lengths", "0-3"], "lengths start at 1, got '0-3'"),
    "resume to a step already passed": (
        ["resume", RUN, "--steps", "100"],
        "is already at step 300, and --steps 100 is not beyond it; pass a larger --steps",
    ),
    "coupled positions on a task without an alignment": (
        ["train", "--task", "sort", "--set", "model.pos_encoding=coupled"],
        "tasks that do: copy, reverse, duplicate, shift, odds_first, addition",
    ),
    "coupled positions on one side only": (
        ["train", "--task", "copy", "--set", "model.tgt_pos_encoding=coupled"],
        "set model.pos_encoding=coupled",
    ),
    "coupled positions beyond max_positions": (
        [
            "train",
            "--task",
            "copy",
            "--set",
            "model.pos_encoding=coupled",
            "--set",
            "model.max_positions=17",
        ],
        "needs 19 positions",
    ),
    "a decoder-only model with an encoding per side": (
        [
            "train",
            "--task",
            "copy",
            "--set",
            "model.arch=decoder",
            "--set",
            "model.tgt_pos_encoding=rope",
        ],
        "model.arch=decoder reads the input and the answer as one sequence",
    ),
    "a decoder-only model with coupled positions on a task without an alignment": (
        [
            "train",
            "--task",
            "sort",
            "--set",
            "model.arch=decoder",
            "--set",
            "model.pos_encoding=coupled",
        ],
        "tasks that do: copy, reverse, duplicate, shift, odds_first, addition",
    ),
    "a decoder-only model whose input and answer pass max_positions": (
        [
            "train",
            "--task",
            "duplicate",
            "--set",
            "model.arch=decoder",
            "--set",
            "model.max_positions=40",
        ],
        "needs 50 positions",
    ),
    "unknown encoding for one side": (
        ["train", "--task", "sort", "--set", "model.src_pos_encoding=nope"],
        "model.src_pos_encoding must be one of",
    ),
    "odd batch when packing": (
        ["train", "--task", "copy", "--set", "train.batch_size=33"],
        "train.batch_size must be even to pack two examples per row, got 33",
    ),
    "compare with one run": (["compare", RUN], "two or more"),
    "layer out of range": (
        ["show-attention", "--run", RUN, "--layer", "3"],
        "layer must be between 0 and 0",
    ),
    "head out of range": (["show-attention", "--run", RUN, "--head", "9"], "--head must be"),
    "unknown checkpoint": (
        ["eval", "--run", RUN, "--checkpoint", "17"],
        "no checkpoint at step 17",
    ),
    "unknown logger": (
        ["train", "--task", "copy", "--set", "train.log_to=tensorbord"],
        "train.log_to takes tensorboard or wandb (or both, comma-separated), got 'tensorbord' "
        "(did you mean 'tensorboard'?)",
    ),
    "export without a format": (["export", RUN], "jab export RUN... --tensorboard"),
    "a task's name where train takes a run to resume": (
        ["train", "reverse"],
        "unexpected argument 'reverse'; did you mean --task reverse?",
    ),
    "a task beside a config that names another": (
        ["train", "--config", f"{RUN}/config.yaml", "--task", "reverse"],
        f"--task reverse and --config {RUN}/config.yaml (task copy) name different tasks",
    ),
    "output folder not writable": (
        ["train", "--task", "copy", "--out", "afile/run"],
        "could not create run folder",
    ),
}


@pytest.fixture(scope="module")
def workdir(trained):
    """The trained folder with wrong things beside its run: made under a lock, since
    both of the session's workers share the folder."""
    with open(trained / "workdir.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        (trained / "others" / "empty").mkdir(parents=True, exist_ok=True)
        (trained / "notarun").mkdir(exist_ok=True)
        (trained / "notarun" / "notes.txt").write_text("hello")
        future = trained / "others" / "future"
        if not future.exists():
            shutil.copytree(trained / RUN, future)
            config = yaml.safe_load((future / "config.yaml").read_text())
            (future / "config.yaml").write_text(yaml.safe_dump({**config, "format": 99}))
        (trained / "broken.yaml").write_text("task: [unclosed\n")
        (trained / "wrongtype.yaml").write_text("model:\n  d_model: wide\n")
        (trained / "noname.yaml").write_text("model:\n  d_model: 32\n")
        (trained / "copymod.yaml").write_text("task:\n  name: copy\n  modulus: 7\n")
        (trained / "afile").write_text("not a folder")
        cell = trained / "astudy" / "seed-1"  # a study's cell may be named seed-1
        if not cell.exists():
            shutil.copytree(trained / RUN, cell)
            (trained / "astudy" / "study.json").write_text("{}")
    return trained


def snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")}


@pytest.mark.parametrize("case", CASES)
def test_bad_input_gets_one_clear_line_and_exit_code_2(case, workdir):
    args, expected = CASES[case]
    before = snapshot(workdir / "runs")
    result = jab_here(*args, cwd=workdir, check=False)  # an exception would fail the test
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("jab: error: ")
    assert expected in lines[0]
    assert "Traceback" not in result.stderr + result.stdout
    assert snapshot(workdir / "runs") == before


@pytest.mark.parametrize(
    "typed, meant",
    [("--tsk", "--task"), ("--seeed", "--seed"), ("--bogus", None), ("--lr", None)],
)
def test_a_mistyped_option_is_matched_only_to_a_close_one(typed, meant, tmp_path):
    result = jab_here("train", typed, cwd=tmp_path, check=False)
    assert result.returncode == 2
    assert "Possible options" not in result.stderr  # Click's guesses: --out for --bogus
    hint = f"(did you mean '{meant}'?)" if meant else "did you mean"
    assert (hint in result.stderr) == bool(meant), result.stderr


@pytest.mark.parametrize("case", ["unknown task", "zero samples", "mistyped option"])
def test_a_mistake_ends_the_jab_process_with_exit_code_2_and_one_line(case, workdir):
    args, expected = CASES[case]
    result = jab(*args, cwd=workdir, check=False)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("jab: error: ") and result.stderr.count("\n") == 1
    assert expected in result.stderr


@pytest.mark.parametrize(
    "args",
    [["train", "--task", "revers"], ["eval", "--run", "runs/nothere"], ["compare", RUN, "rnus/x"]],
)
def test_a_mistyped_task_or_run_is_answered_before_jax_is_imported(args, workdir):
    """At once: in a fifth of the second that importing JAX takes."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "jabcli", *args],
        cwd=workdir,
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    imported = [line.split("|")[-1].strip() for line in result.stderr.splitlines()]
    said = [line for line in result.stderr.splitlines() if not line.startswith("import time:")]
    assert result.returncode == 2 and len(said) == 1 and said[0].startswith("jab: error: ")
    assert "jabcli.cli.cli" in imported and "jax" not in imported


def test_predict_with_nothing_on_stdin_says_so(workdir):
    result = subprocess.run(
        [sys.executable, "-m", "jabcli", "predict", "--run", RUN, "-"],
        cwd=workdir,
        env=env(),
        input="\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert (
        result.stderr
        == "jab: error: - reads inputs from stdin, one per line, but there were none\n"
    )


def test_jab_debug_shows_the_traceback(workdir):
    result = subprocess.run(
        [sys.executable, "-m", "jabcli", "eval", "--run", "runs/nothere"],
        cwd=workdir,
        env={**env(), "JAB_DEBUG": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0 and "Traceback" in result.stderr


def test_a_full_disk_mid_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "manifest.json"
    target.write_text("old")
    real_fsync = os.fsync

    def disk_full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(JabError, match="the disk is full"):
        runs.atomic_write(target, b"new contents")
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]


# Inputs of 4000 symbols to a one-layer model (quick to compile): a training step still
# needs about 275 GiB.
LONG_SEQUENCES = ["task.min_len=3990", "task.max_len=4000", "model.max_positions=4096",
                  "model.num_layers=1", "model.d_model=16", "model.d_ff=32"]  # fmt: skip


@pytest.mark.parametrize(
    "sets, lower",
    [
        (["model.d_model=100000"], "model.d_model"),
        (LONG_SEQUENCES, "task.max_len"),
    ],
    ids=["a model too big", "sequences too long"],
)
def test_a_run_too_big_for_memory_is_refused_before_it_allocates(sets, lower, tmp_path):
    args = [a for s in sets for a in ("--set", s)]
    result = jab_here(
        "train", "--task", "copy", *args, "--steps", "1", "--out", "big", cwd=tmp_path, check=False
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "of memory, but only" in lines[0] and lower in lines[0]
    assert not (tmp_path / "big").exists()


def test_a_model_too_big_is_refused_before_its_position_table_is_made(tmp_path, monkeypatch):
    """With a d_model of a million, the sinusoidal table alone would take gigabytes."""
    from jabcli.model import positions

    def never(*args):
        raise AssertionError("the table was made")

    monkeypatch.setattr(positions, "sinusoidal_encoding", never)
    result = jab_here(
        "train", "--task", "copy", "--set", "model.d_model=1000000", "--out", "big",
        cwd=tmp_path, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "holding the model with its optimizer state needs about" in result.stderr
    assert not (tmp_path / "big").exists()


def test_lengths_whose_decoding_cannot_fit_one_input_are_refused_before_decoding(
    workdir, monkeypatch
):
    """Decoding takes a chunk of inputs at a time, however many there are; an input too
    long for memory even alone is refused with the memory it needs, before any work."""
    from jabcli.core import memory
    from jabcli.evaluation import decode

    def never(*args, **kwargs):
        raise AssertionError("decoding started")

    monkeypatch.setattr(decode, "answer", never)
    monkeypatch.setattr(memory, "available_bytes", lambda: 32 * 2**20)
    result = jab_here(
        "eval", "--run", RUN, "--lengths", "900-1000", "--samples", "1", cwd=workdir, check=False
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().startswith(
        "jab: error: decoding an input of 1000 symbols needs about "
    )
    assert "of memory, but only 32.0 MiB is available; lower the longest length (--lengths)" in (
        result.stderr
    )
