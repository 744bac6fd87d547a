"""Nothing lost: interrupts, resume, corrupted checkpoints, locks, bad numerics."""

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from damage import edit_config, newest_step, truncate
from jabrun import TINY, env, jab_here


def test_a_corrupt_metrics_line_mid_file_loses_no_other_records_on_resume(three_checkpoints):
    run = three_checkpoints / "run"
    before = (run / "metrics.jsonl").read_text().splitlines()
    bad = before[1][:30]  # a line damaged in place, not one cut short by a kill
    (run / "metrics.jsonl").write_text(
        "".join(f"{line}\n" for line in [before[0], bad, *before[2:]])
    )
    jab_here("train", "--resume", "run", "--steps", "350", cwd=three_checkpoints)
    after = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    kept = [json.loads(line) for line in [before[0], *before[2:]]]
    assert after[: len(kept)] == kept  # every valid line, before and after the bad one
    assert [r["step"] for r in after[len(kept) :]] == [350]
    assert (run / "metrics.rejected.jsonl").read_text() == bad + "\n"


def test_a_run_being_trained_by_another_process_is_refused(three_checkpoints):
    with open(three_checkpoints / "run/.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as a jab process training into it holds it
        held.write("4242")
        held.flush()
        result = jab_here(
            "train", "--resume", "run", "--steps", "400", cwd=three_checkpoints, check=False
        )
    assert result.returncode == 2
    assert "another jab process (pid 4242)" in result.stderr


def test_of_two_jab_train_into_one_new_folder_one_trains_to_the_end_and_one_is_refused(
    tmp_path, monkeypatch
):
    """Started together, both find --out free; here the second (in this process) goes on
    only once the first (a `jab train` process) holds the folder, as it did every time by
    chance. It is refused in one line, having written and removed nothing: the first,
    which the removal of its folder used to kill, trains to its end."""
    from jabcli.runs.runs import Run
    from jabcli.training import training

    args = ["train", *TINY, "--steps", "300", "--out", "same"]
    lock = tmp_path / "same/.lock"
    first = None
    check = training.check

    def check_then_let_the_first_take_the_folder(experiment):
        nonlocal first
        check(experiment)
        first = subprocess.Popen(
            [sys.executable, "-m", "jabcli", *args],
            cwd=tmp_path,
            env=env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        while not (Run(tmp_path / "same").is_running() and lock.read_text() == str(first.pid)):
            assert first.poll() is None, first.communicate()
            time.sleep(0.05)

    monkeypatch.setattr(training, "check", check_then_let_the_first_take_the_folder)
    second = jab_here(*args, cwd=tmp_path, check=False)
    _, err = first.communicate(timeout=300)
    assert second.returncode == 2 and second.stdout == ""
    assert second.stderr == (
        f"jab: error: same is being written by another jab process (pid {first.pid})\n"
    )
    assert first.returncode == 0, err
    assert newest_step(tmp_path / "same") == 300


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600)])
def test_the_lock_file_is_not_executable_and_follows_the_umask(tmp_path, umask, mode):
    from jabcli.runs.runs import Run

    before = os.umask(umask)
    try:
        with Run(tmp_path).lock():
            made = (tmp_path / ".lock").stat().st_mode & 0o777
    finally:
        os.umask(before)
    assert oct(made) == oct(mode)


def read_only(folder: Path) -> list[str]:
    """The start of a command line that runs the rest with `folder` mounted read-only: a
    bind mount, in user and mount namespaces of its own, as a user may make them (no
    root needed). Where the kernel or the sandbox allows no such namespace, the test is
    skipped."""
    remount = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    prefix = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", remount, str(folder)]
    if shutil.which("unshare") is None:
        pytest.skip("no unshare command to mount a folder read-only")
    probe = subprocess.run([*prefix, "touch", str(folder / "probe")], capture_output=True)
    if b"Read-only file system" not in probe.stderr:
        pytest.skip(f"cannot mount a folder read-only here: {probe.stderr.decode().strip()}")
    return prefix


def test_training_into_an_empty_folder_on_a_read_only_file_system_is_one_line_saying_so(
    tmp_path,
):
    (tmp_path / "ro/empty").mkdir(parents=True)
    command = [sys.executable, "-m", "jabcli", "train", *TINY, "--out", "ro/empty"]
    result = subprocess.run(
        [*read_only(tmp_path / "ro"), *command],
        cwd=tmp_path,
        env=env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == "jab: error: could not write ro/empty: read-only file system\n"
    assert list((tmp_path / "ro/empty").iterdir()) == []


def test_a_lock_file_left_behind_never_blocks_a_run(three_checkpoints):
    """Not by a dead process's pid, nor by the pid of a live process that is not jab."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for pid in (dead.pid, 1):
        (three_checkpoints / "run/.lock").write_text(str(pid))
        jab_here("resume", "run", "--steps", str(350 if pid != 1 else 400), cwd=three_checkpoints)
        assert not (three_checkpoints / "run/.lock").exists()


def test_runs_lists_a_run_with_a_truncated_checkpoint_as_damaged(three_checkpoints):
    truncate(three_checkpoints / "run", 300)
    (row,) = json.loads(jab_here("runs", ".", "--json", cwd=three_checkpoints).stdout)
    assert row["state"] == (
        "damaged: checkpoint run/checkpoints/step-00000300.npz is corrupted (checksum "
        "mismatch); jab eval, predict and resume use step 200"
    )
    assert row["run"] == "run" and row["step"] == 300 and row["task"] == "copy"
    assert row["parameters"] > 0  # counted in the checkpoint that is used
    shown = " ".join(jab_here("runs", ".", cwd=three_checkpoints).stdout.split())
    assert "damaged: checkpoint run/checkpoints/step-00000300.npz is corrupted" in shown
    assert "target reached" not in shown and "finished" not in shown


@pytest.mark.parametrize(
    "change",
    [
        lambda c: c["model"].update(d_model=32),
        lambda c: c["model"].update(pos_encoding="sinusoidl"),
        lambda c: c.update(vocab=[*c["vocab"][:-1], "Z"]),
    ],
    ids=["d_model", "pos_encoding-misspelt", "vocab-entry"],
)
def test_runs_lists_a_run_whose_config_was_edited_as_damaged_and_predict_names_it(
    three_checkpoints, change
):
    edit_config(three_checkpoints / "run", change)
    (row,) = json.loads(jab_here("runs", ".", "--json", cwd=three_checkpoints).stdout)
    said = (
        "run/config.yaml was edited after checkpoint step-00000300.npz was saved (only "
        "train.steps may change, with jab resume --steps); restore it or train a new run"
    )
    assert row["state"] == f"damaged: {said}"
    result = jab_here("predict", "012", "--run", "run", cwd=three_checkpoints, check=False)
    assert result.returncode == 2 and result.stderr == f"jab: error: {said}\n"


def test_a_damaged_seed_shows_its_group_as_damaged_naming_the_seed(three_checkpoints):
    group = three_checkpoints / "runs/g"
    for seed in (0, 1):
        shutil.copytree(three_checkpoints / "run", group / f"seed-{seed}")
    (group / "group.json").write_text('{"format": 1, "seeds": [0, 1]}')
    truncate(group / "seed-1", 300)
    (row,) = json.loads(jab_here("runs", "--json", cwd=three_checkpoints).stdout)
    assert row["run"] == "runs/g" and row["seeds"] == 2
    assert row["state"].startswith(
        "damaged: checkpoint runs/g/seed-1/checkpoints/step-00000300.npz is corrupted"
    )


def test_damaged_runs_and_groups_are_listed_as_damaged_with_the_reason(three_checkpoints):
    root = three_checkpoints
    for name in ("empty-config", "bad-manifest", "group-bad", "group-missing-seed"):
        shutil.copytree(root / "run", root / "runs" / name / "seed-0")
    (root / "runs/empty-config").joinpath("seed-0").rename(root / "runs/empty-config/x")
    shutil.rmtree(root / "runs/empty-config")
    shutil.copytree(root / "run", root / "runs/empty-config")
    (root / "runs/empty-config/config.yaml").write_text("")
    shutil.rmtree(root / "runs/bad-manifest")
    shutil.copytree(root / "run", root / "runs/bad-manifest")
    (root / "runs/bad-manifest/checkpoints/manifest.json").write_text("{")
    (root / "runs/group-bad/group.json").write_text("garbage")
    (root / "runs/group-missing-seed/group.json").write_text('{"format": 1, "seeds": [0, 1]}')
    rows = {r["run"]: r["state"] for r in json.loads(jab_here("runs", "--json", cwd=root).stdout)}
    assert rows["runs/empty-config"].startswith("damaged: ")
    assert (
        rows["runs/bad-manifest"].startswith("damaged: ")
        and "manifest.json" in rows["runs/bad-manifest"]
    )
    assert (
        rows["runs/group-bad"] == "damaged: runs/group-bad/group.json is corrupted (not valid JSON)"
    )
    assert "runs/group-missing-seed/seed-1 is missing" in rows["runs/group-missing-seed"]
    shown = jab_here("runs", cwd=root).stdout
    assert "damaged" in shown
    curves = jab_here("curves", "runs/group-missing-seed", cwd=root, check=False)
    assert "runs/group-missing-seed/seed-1 is missing" in curves.stderr


def test_resuming_a_run_being_trained_says_only_that_it_is_busy(three_checkpoints):
    (three_checkpoints / "run/checkpoints/manifest.json").write_text(
        json.dumps({"format": 1, "checkpoints": []})
    )
    for path in (three_checkpoints / "run/checkpoints").glob("*.npz"):
        path.unlink()
    with open(three_checkpoints / "run/.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("4242")
        held.flush()
        result = jab_here("resume", "run", cwd=three_checkpoints, check=False)
    assert result.returncode == 2 and result.stdout == ""
    assert (
        result.stderr.strip()
        == "jab: error: run is being written by another jab process (pid 4242)"
    )
