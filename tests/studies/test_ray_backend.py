"""`jab study run --ray`: a study's cells as Ray tasks, on a cluster of its own or one it
joins (jabcli/studies/ray_backend.py); its signals and resumes as on this machine."""

import contextlib
import os
import re
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest
from jabrun import ONE_CELL, TINY_BASE, interrupt_when, jab_here, one_cell, results

ROOT = Path(__file__).resolve().parents[2]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def ray_processes(tmp: Path) -> list[int]:
    """The processes a jab started with TMPDIR=`tmp` left running (Ray's among them)."""
    left = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if f"TMPDIR={tmp}".encode() in (proc / "environ").read_bytes().split(b"\0"):
                left.append(int(proc.name))
        except OSError:
            pass
    return left


@pytest.fixture
def private_tmp():
    """A short TMPDIR of the test's own (Ray's sockets live under it and must be short),
    holding a stale ray_current_cluster, as a cluster stopped earlier on the machine
    leaves it."""
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="jabray", dir="/tmp"))
    (tmp / "ray").mkdir()
    (tmp / "ray" / "ray_current_cluster").write_text("127.0.0.1:1")
    yield tmp
    for pid in ray_processes(tmp):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.filterwarnings("ignore:os.fork")  # Ray forks its processes and execs at once
def test_a_ray_study_of_a_users_task_keeps_its_training_through_signals_and_ends_as_here(
    smoke, tmp_path, private_tmp, monkeypatch
):
    """SIGTERM to a study on a cluster of its own (`--ray local`): it keeps its cells'
    training and leaves no Ray process behind. Ctrl-C to it resumed on a cluster it
    joins (`--ray ADDRESS`): it keeps the training done since. And a cell stopped and
    resumed so on Ray ends with the results it gives run straight on this machine. (One
    test and one study, so that the suite starts two Ray clusters, not three.)"""
    ray = pytest.importorskip("ray")
    # The smoke study's first cell, and one so slow a learner that it never reaches its
    # target and ends: only a signal stops it. Its task is the user's own, in a file next
    # to the study (docs/own-task.md's), which the cells on Ray get with the study.
    own_task = re.search(r"```python\n(.*?)```", (ROOT / "docs/own-task.md").read_text(), re.S)
    write(tmp_path / "ends.py", own_task.group(1))
    study = write(tmp_path / "long.yaml", one_cell(tmp_path).read_text() + (
        "rows: [{name: long, task: 'ends.py:Ends', steps: 100000,"
        " set: {train.learning_rate: 1.0e-7}}]\n"
    ))  # fmt: skip
    monkeypatch.setenv("TMPDIR", str(private_tmp))  # where Ray and its tasks keep their files
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")  # --ray local starts its own all the same

    def saved_past(step: int):  # a task's cell, in its temporary folder, saved past `step`
        def ready() -> bool:
            found = private_tmp.glob("jab-cell-*/long/seed-0/checkpoints/step-*.npz")
            return any(int(p.stem.split("-")[1]) > step for p in found)

        return ready

    checkpoints = tmp_path / "runs/r/long/seed-0/checkpoints"
    args = ["study", "run", study, "--out", "runs/r", "--ray"]
    code, out, err = interrupt_when([*args, "local"], tmp_path, saved_past(0), signal.SIGTERM)
    assert code == 143, err
    assert re.search(r"Interrupted: [01] of 2 cells measured", out) and "Resume with:" in out
    assert "SIGTERM: stopping each running cell when its steps under way end" in out
    assert "Token authentication" not in err
    deadline = time.time() + 20
    while ray_processes(private_tmp) and time.time() < deadline:
        time.sleep(0.5)
    assert ray_processes(private_tmp) == []  # its cluster ended with it
    first = max(int(p.stem.split("-")[1]) for p in checkpoints.glob("step-*.npz"))

    def copy_measured_and_long_saved_past_first() -> bool:
        measured = (tmp_path / "runs/r" / ONE_CELL[0] / "evaluation.json").exists()
        return measured and saved_past(first)()

    monkeypatch.delenv("RAY_ADDRESS")
    # "local": a cluster of the test's own, whatever a stale cluster file says
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        address = ray.get_runtime_context().gcs_address
        code, out, err = interrupt_when(
            [*args, address], tmp_path, copy_measured_and_long_saved_past_first
        )
    finally:
        ray.shutdown()
    assert code == 130, err
    assert "Stopping each running cell when its steps under way end" in out
    assert max(int(p.stem.split("-")[1]) for p in checkpoints.glob("step-*.npz")) > first
    log = (tmp_path / "runs/r/logs/long.log").read_text()
    assert f"Resuming runs/r/long from step {first}" in log  # the study's, not a task's
    assert (tmp_path / "runs/r/long/seed-0/task-code.py").read_text() == own_task.group(1)
    assert results(tmp_path / "runs/r", ONE_CELL) == results(smoke[0] / "runs/smoke", ONE_CELL)


def test_ray_auto_with_only_a_stale_cluster_file_fails_at_once(tmp_path, private_tmp, monkeypatch):
    pytest.importorskip("ray")
    study = write(tmp_path / "s.yaml", TINY_BASE + "rows: [{name: a}]\n")
    monkeypatch.setenv("TMPDIR", str(private_tmp))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    result = jab_here("study", "run", study, "--ray", "auto", cwd=tmp_path, check=False)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "jab: error: could not reach the Ray cluster at 127.0.0.1:1 (auto) (a cluster that "
        "has stopped?): Connection refused"
    )
    (private_tmp / "ray" / "ray_current_cluster").unlink()
    result = jab_here("study", "run", study, "--ray", "auto", cwd=tmp_path, check=False)
    assert "--ray auto found no Ray cluster on this machine" in result.stderr


def test_ray_option_without_ray_installed_says_how_to_get_it(tmp_path, monkeypatch):
    study = write(tmp_path / "s.yaml", TINY_BASE + "rows: [{name: a}]\n")
    monkeypatch.setitem(sys.modules, "ray", None)  # as if never installed
    result = jab_here("study", "run", study, "--ray", "auto", cwd=tmp_path, check=False)
    assert result.returncode == 2
    assert "--ray needs Ray: pip install ray" in result.stderr
