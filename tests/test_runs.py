"""Nothing lost: interrupts, resume, corrupted checkpoints, locks, bad numerics."""

import dataclasses
import fcntl
import io
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from jabrun import TINY, env, interrupt_after, jab, jab_here

from jabcli.core.errors import JabError

ROOT = Path(__file__).resolve().parent.parent

# Long enough for a signal sent at its second to fifth log line (steps 50-125) to land
# part-way, with a second or more to spare: a tiny model trains about 500 steps a second.
LONG = [*TINY, "--steps", "600", "--set", "train.log_every=25"]


def checkpoint(run: Path, step: int) -> dict:
    data = (run / "checkpoints" / f"step-{step:08d}.npz").read_bytes()
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def newest_step(run: Path) -> int:
    return json.loads((run / "checkpoints/manifest.json").read_text())["checkpoints"][-1]["step"]


def metrics(run: Path) -> list[dict]:
    timing = {"steps_per_sec", "elapsed_s"}
    return [
        {k: v for k, v in json.loads(line).items() if k not in timing}
        for line in (run / "metrics.jsonl").read_text().splitlines()
    ]


def test_ctrl_c_then_resume_ends_bitwise_equal_to_an_uninterrupted_run(tmp_path):
    jab_here("train", *LONG, "--out", "whole", cwd=tmp_path)
    code, out, err = interrupt_after(["train", *LONG, "--out", "cut"], tmp_path, Path("cut"), 4)
    assert code == 130, err
    assert "jab resume cut" in " ".join(out.split())
    stopped_at = newest_step(tmp_path / "cut")
    assert 0 < stopped_at < newest_step(tmp_path / "whole")  # it really stopped part-way

    jab_here("train", "--resume", "cut", cwd=tmp_path)
    final = newest_step(tmp_path / "whole")
    assert newest_step(tmp_path / "cut") == final
    whole, cut = checkpoint(tmp_path / "whole", final), checkpoint(tmp_path / "cut", final)
    assert whole.keys() == cut.keys()
    for name in whole:
        np.testing.assert_array_equal(whole[name], cut[name], err_msg=name)
    assert metrics(tmp_path / "whole") == metrics(tmp_path / "cut")


def test_sigterm_saves_a_checkpoint_and_exits_143(tmp_path):
    code, out, _ = interrupt_after(
        ["train", *LONG, "--out", "run"], tmp_path, Path("run"), 2, signal.SIGTERM
    )
    assert code == 143
    manifest = json.loads((tmp_path / "run/checkpoints/manifest.json").read_text())
    last = manifest["checkpoints"][-1]["step"]
    assert last % 25 == 0 and last >= 50
    assert f"Interrupted at step {last}" in out


@pytest.fixture
def three_checkpoints(trained, tmp_path) -> Path:
    """A copy of the session's tiny run: TINY for 300 steps, checkpoints at 100, 200, 300."""
    shutil.copytree(trained / "runs" / "tiny", tmp_path / "run")
    return tmp_path


def truncate(run: Path, step: int) -> bytes:
    """Cut a checkpoint short, as a full disk or a bad copy leaves it; its bytes before."""
    path = run / "checkpoints" / f"step-{step:08d}.npz"
    before = path.read_bytes()
    path.write_bytes(before[:1000])
    return before


def test_eval_falls_back_past_a_truncated_checkpoint_and_names_it_in_one_line(
    three_checkpoints,
):
    truncate(three_checkpoints / "run", 300)
    result = jab_here("eval", "--run", "run", "--samples", "50", "--json", cwd=three_checkpoints)
    assert json.loads(result.stdout)["step"] == 200
    assert result.stderr == (
        "jab: note: checkpoint run/checkpoints/step-00000300.npz is corrupted (checksum "
        "mismatch); using step 200, the newest valid checkpoint\n"
    )


def test_predict_falls_back_to_the_newest_valid_checkpoint_and_says_so(three_checkpoints):
    truncate(three_checkpoints / "run", 300)
    for command in (["predict", "012"], ["show-attention", "--input", "012"]):
        result = jab_here(*command, "--run", "run", cwd=three_checkpoints)
        assert "012" in result.stdout
        (line,) = result.stderr.splitlines()
        assert line.startswith("jab: note: checkpoint run/checkpoints/step-00000300.npz")
        assert line.endswith("using step 200, the newest valid checkpoint")


def test_the_api_warns_of_a_damaged_checkpoint_it_passes_over(three_checkpoints):
    import jabcli as jab
    from jabcli.core.errors import Note

    truncate(three_checkpoints / "run", 300)
    with pytest.warns(Note, match="step-00000300.npz is corrupted .* using step 200"):
        predictions = jab.load(three_checkpoints / "run").predict(["012"])
    assert predictions[0]["output"] == "012"


def test_a_damaged_checkpoint_asked_for_by_step_is_one_error_naming_the_valid_steps(
    three_checkpoints,
):
    truncate(three_checkpoints / "run", 300)
    result = jab_here(
        "predict", "012", "--run", "run", "--checkpoint", "300", cwd=three_checkpoints, check=False
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "jab: error: checkpoint run/checkpoints/step-00000300.npz is corrupted (checksum "
        "mismatch); valid checkpoints of run: step(s) 100, 200 (--checkpoint 200 for the "
        "newest)\n"
    )


def test_a_run_with_no_valid_checkpoint_left_is_one_error(three_checkpoints):
    for step in (100, 200, 300):
        truncate(three_checkpoints / "run", step)
    result = jab_here("predict", "012", "--run", "run", cwd=three_checkpoints, check=False)
    assert result.returncode == 2
    assert result.stderr == (
        "jab: error: checkpoint run/checkpoints/step-00000300.npz is corrupted (checksum "
        "mismatch), and run has no other valid checkpoint\n"
    )


def test_resume_falls_back_to_the_newest_valid_checkpoint_with_one_note_on_stderr_as_eval(
    three_checkpoints,
):
    newest = three_checkpoints / "run/checkpoints/step-00000300.npz"
    newest.write_bytes(b"garbage")
    result = jab_here("train", "--resume", "run", "--steps", "400", cwd=three_checkpoints)
    assert result.stderr == (
        "jab: note: checkpoint run/checkpoints/step-00000300.npz is corrupted (checksum "
        "mismatch); falling back to an earlier checkpoint\n"
    )
    assert "falling back" not in result.stdout
    assert "Resuming run from step 200" in " ".join(result.stdout.split())
    steps = [
        json.loads(line)["step"]
        for line in (three_checkpoints / "run/metrics.jsonl").read_text().splitlines()
    ]
    assert steps == sorted(set(steps)) and steps[-1] > 200  # no step logged twice


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


def test_a_run_killed_before_its_first_checkpoint_resumes_from_step_0(trained, tmp_path):
    """What `kill -9` between the first log (step 50) and the first checkpoint (100) leaves:
    the config, an empty checkpoints/ folder, a metrics line, a torn one and a stale .lock."""
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    config = yaml.safe_load((trained / "runs/tiny/config.yaml").read_text())
    config["train"]["steps"] = 100
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    (run / "metrics.jsonl").write_text('{"step": 50, "loss": 99.0}\n{"step": 100, "lo')
    (run / ".lock").write_text("4242")
    result = jab_here("train", "--resume", "run", cwd=tmp_path)
    said = " ".join(result.stdout.split())
    assert "Resuming run from step 0; it has no checkpoint yet" in said
    assert said.count("no checkpoint") == 1  # said once, not once more another way
    records = metrics(run)
    assert [r["step"] for r in records] == [50, 100]
    assert records[0]["loss"] != 99.0  # the killed process's records are gone
    assert newest_step(run) == 100


def test_a_second_ctrl_c_says_whether_the_run_was_kept(three_checkpoints, monkeypatch):
    from jabcli.experiment.experiment import Experiment
    from jabcli.runs.runs import Run
    from jabcli.training import session, training

    def second_ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt  # as StopRequest raises it, here while compiling

    monkeypatch.setattr(training, "Trainer", second_ctrl_c)
    run = three_checkpoints / "run"
    with pytest.raises(KeyboardInterrupt) as resumed:
        session.resume(run, 400, session.Observer())
    assert resumed.value.message == f"run {run} kept; its newest checkpoint is at step 300"

    new = three_checkpoints / "new"
    cfg, tokenizer = Run(run).load_config()
    with pytest.raises(KeyboardInterrupt) as started:
        session.start(Experiment.create(cfg, tokenizer), new, session.Observer())
    assert started.value.message == f"run folder {new} removed: it had no checkpoint yet"
    assert not new.exists()

    fresh = three_checkpoints / "fresh"  # a run killed before its first checkpoint
    fresh.mkdir()
    shutil.copy(run / "config.yaml", fresh)
    with pytest.raises(KeyboardInterrupt) as restarted:
        session.resume(fresh, None, session.Observer())
    assert "kept; it has no checkpoint yet" in restarted.value.message
    assert (fresh / "config.yaml").exists()  # not created by this process: never removed


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


def test_an_extended_run_that_is_interrupted_resumes_to_its_new_target(tmp_path):
    # Evaluated only at its last step, so nothing stops it early.
    jab_here(
        "train",
        *TINY,
        "--steps",
        "100",
        "--set",
        "train.eval_every=5000",
        "--out",
        "run",
        cwd=tmp_path,
    )
    code, out, _ = interrupt_after(
        ["train", "--resume", "run", "--steps", "1000"], tmp_path, Path("run"), 4
    )
    assert code == 130
    stopped_at = newest_step(tmp_path / "run")
    assert 100 < stopped_at < 1000
    hint = " ".join(out.split()).split("Resume with: ")[1].split()
    assert hint[:2] == ["jab", "resume"]
    result = jab_here(*hint[1:], cwd=tmp_path)
    assert f"Resuming run from step {stopped_at}" in " ".join(result.stdout.split())
    assert newest_step(tmp_path / "run") == 1000


def test_a_diverging_loss_stops_with_the_step_and_a_hint(tmp_path):
    result = jab_here(
        "train",
        *TINY,
        "--steps",
        "300",
        "--set",
        "train.learning_rate=1e6",  # the tiny run's program: its schedule is an input
        "--out",
        "run",
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 2
    assert "non-finite" in result.stderr and "learning_rate" in result.stderr
    assert not (tmp_path / "run").exists()  # it diverged before its first checkpoint


def test_kill_9_mid_training_leaves_a_run_that_evaluates_and_resumes(tmp_path):
    code, _, _ = interrupt_after(
        ["train", *LONG, "--out", "run"], tmp_path, Path("run"), 5, signal.SIGKILL
    )
    assert code == -signal.SIGKILL
    jab_here("eval", "--run", "run", "--samples", "50", cwd=tmp_path)
    result = jab_here("train", "--resume", "run", cwd=tmp_path)
    assert "Resuming run from step" in " ".join(result.stdout.split())


def test_jab_eval_never_draws_from_a_stream_training_uses():
    import jax

    from jabcli.inspection import inspection
    from jabcli.training import training

    for seed in (0, 1, 7):
        root = jax.random.PRNGKey(seed)
        streams = (training.TRAIN_STREAM, training.DROPOUT_STREAM, training.EVAL_STREAM)
        used = [jax.random.fold_in(root, s) for s in (*streams, training.POSITION_STREAM)]
        key = inspection.evaluation_key(seed)
        assert not any(np.array_equal(key, other) for other in used)


def edit_config(run: Path, change) -> None:
    config = yaml.safe_load((run / "config.yaml").read_text())
    change(config)
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


@pytest.mark.parametrize(
    "change",
    [
        lambda c: c.update(vocab=c["vocab"][:-2] + c["vocab"][:-3:-1]),
        lambda c: c.pop("model"),
        lambda c: c["task"].update(alphabet="0132"),
    ],
    ids=["reordered-vocab", "model-section-removed", "alphabet-edited"],
)
def test_a_hand_edited_run_config_is_refused_naming_the_file(trained, tmp_path, change):
    from jabcli.inspection import inspection

    run = tmp_path / "run"
    shutil.copytree(trained / "runs/tiny", run)
    edit_config(run, change)
    with pytest.raises(JabError, match=r"run/config.yaml was edited after checkpoint"):
        inspection.load(run)


def test_extending_steps_is_the_one_config_edit_a_checkpoint_accepts(trained, tmp_path):
    from jabcli.inspection import inspection

    run = tmp_path / "run"
    shutil.copytree(trained / "runs/tiny", run)
    edit_config(run, lambda c: c["train"].update(steps=5000))
    assert inspection.load(run).step == 300


def test_a_hand_edited_manifest_step_is_refused(trained, tmp_path):
    from jabcli.inspection import inspection

    run = tmp_path / "run"
    shutil.copytree(trained / "runs/tiny", run)
    manifest = json.loads((run / "checkpoints/manifest.json").read_text())
    manifest["checkpoints"][-1]["step"] = 999
    (run / "checkpoints/manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(JabError, match=r"manifest.json says .* step 999, but it holds step 300"):
        inspection.load(run)


@pytest.mark.parametrize("after_s", [0.3, 1.5])
def test_ctrl_c_while_jab_starts_exits_130_with_one_line_and_no_broken_run(tmp_path, after_s):
    """Ctrl-C while Python imports JAX's compiled extensions used to segfault, print an
    ImportError or a traceback, or be swallowed by an interpreter callback (exit 0)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "jabcli", "train", *TINY, "--out", "run"],
        cwd=tmp_path,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(after_s)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    run = tmp_path / "run"
    if err:  # stopped before training began: no run folder is left behind
        assert err.splitlines() == [err.strip()] and err.startswith("jab: error: interrupted")
        assert "Traceback" not in out + err
        assert not run.exists()
    else:  # training had begun: it stopped at its first step with a checkpoint that loads
        assert "Interrupted at step" in out
        from jabcli.inspection import inspection

        assert inspection.load(run).step == newest_step(run)


def ctrl_c_twice(proc: subprocess.Popen) -> tuple[str, str, str]:
    """Ctrl-C `proc`, then again once it said a line on stdout (or after 10 s), later than
    the same Ctrl-C delivered twice could come: that line ("" for none), the rest of its
    stdout and its stderr, once it ended (within 15 s, else the test fails)."""
    from jabcli.training.session import SAME_SIGNAL_S

    proc.send_signal(signal.SIGINT)
    said = select.select([proc.stdout], [], [], 10)[0] and proc.stdout.readline()
    time.sleep(SAME_SIGNAL_S)
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the second Ctrl-C did not end the process while it computed")
    return said or "", out, err


def test_a_first_ctrl_c_says_at_once_that_training_stops_and_a_second_stops_it_at_once(
    tmp_path,
):
    """One chunk of 20000 steps stands in for a slow model's chunk (minutes on the
    Tape-RNN): the first Ctrl-C must be answered while the chunk runs, not when it ends,
    and two must end the process long before the chunk would. The chunk's program is
    stored by a training before (as on every training after a user's first): the first
    run of a stored program, checked before it is trusted, is that long chunk."""
    chunk = ["--set", "train.log_every=20000"]  # (the chunk's program depends on it)
    jab("train", *TINY, *chunk, "--steps", "20", "--out", "before", cwd=tmp_path)
    args = [*TINY, *chunk, "--steps", "20000", "--out", "run"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "jabcli", "train", *args],
        cwd=tmp_path,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Ready: training says what it trains once its step is compiled (the line gives its
    # FLOPs); a moment later it is inside the long chunk, which runs for many seconds.
    assert proc.stdout.readline().startswith("Training copy"), proc.stderr.read()
    time.sleep(1)
    said, _, err = ctrl_c_twice(proc)
    assert said.startswith("Stopping when the steps under way end"), said
    assert "Ctrl-C again stops at once" in said
    assert proc.returncode == 130
    assert (
        err.strip() == "jab: error: interrupted; run folder run removed: it had no checkpoint yet"
    )
    assert not (tmp_path / "run").exists()


def compiling(program: str, log: str) -> bool:
    """Whether JAX's log (JAX_LOG_COMPILES) says it compiled `program`: 'Compiling
    jit(NAME)' in today's JAX, 'Compiling NAME with global shapes' in 0.6 (Python 3.10's)."""
    return f"Compiling jit({program})" in log or f"Compiling {program} with" in log


def test_a_second_ctrl_c_still_prints_the_command_that_resumes_the_run_it_kept(tmp_path):
    chunk = ["--set", "train.log_every=20000"]  # one long chunk, as in the test above
    jab_here("train", *TINY, *chunk, "--steps", "20", "--out", "run", cwd=tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "jabcli", "resume", "run", "--steps", "20000"],
        cwd=tmp_path,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in proc.stdout:  # said once the step is compiled, before the long chunk
        if line.startswith("Training copy"):
            break
    time.sleep(1)
    _, out, err = ctrl_c_twice(proc)
    assert proc.returncode == 130
    assert err == "jab: error: interrupted; run run kept; its newest checkpoint is at step 20\n"
    assert "Resume with: jab resume run" in " ".join(out.split())


def test_one_signal_delivered_twice_at_once_as_timeout_sends_it_stops_once_keeping_the_steps(
    three_checkpoints,
):
    """`timeout -s INT jab train` signals jab, then its process group, jab again, within
    milliseconds: that is one Ctrl-C, which saves the steps since the last checkpoint, not
    two, which would stop at once and lose them."""
    from jabcli.training import session

    class Timeout(session.Observer):
        sent = False

        def log(self, records):
            if not self.sent:
                self.sent = True
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.01)  # the first handled as the second comes
                os.kill(os.getpid(), signal.SIGINT)

    try:
        outcome = session.resume(three_checkpoints / "run", 1000, Timeout())
    except KeyboardInterrupt as err:
        pytest.fail(f"taken for a second Ctrl-C: {err}")
    assert outcome.interrupted_by == signal.SIGINT
    assert outcome.step == 350  # the first log after 300, not a step evaluated at
    assert newest_step(three_checkpoints / "run") == 350


def test_ctrl_c_while_a_large_model_compiles_is_answered_at_once(tmp_path):
    """Eight layers take XLA tens of seconds to compile, in a fresh cache (sixteen took 77 s
    at XLA's default options on the 2-core machine). The first Ctrl-C is answered while
    it compiles and the second ends the process before the compilation ends (no timed
    assert: the suite's machine is shared; XLA's own log says whether it finished)."""
    args = ["train", "--task", "copy", "--set", "model.num_layers=8", "--steps", "10"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "jabcli", *args, "--out", "run"],
        cwd=tmp_path,
        env={**env(), "XDG_CACHE_HOME": str(tmp_path / "cache"), "JAX_LOG_COMPILES": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in proc.stderr:  # JAX says when it starts compiling the training step
        if compiling("train_chunk", line):
            break
    time.sleep(1)
    said, _, err = ctrl_c_twice(proc)
    assert said.startswith("Stopping when the steps under way end"), said
    assert proc.returncode == 130
    assert "Finished XLA compilation of jit(train_chunk)" not in err  # it was cut short
    assert err.strip().endswith("run folder run removed: it had no checkpoint yet")
    assert not (tmp_path / "run").exists()


def test_a_model_traced_once_is_not_traced_again_and_a_broken_cache_entry_is_only_a_miss(
    trained, monkeypatch, tmp_path
):
    """The parameters' names and shapes, which loading a checkpoint checks against, are
    kept beside the compilation cache: a second `jab predict` reads them, a run of
    another config gets its own, and a damaged entry is found again, never trusted."""
    from jabcli.core import runtime
    from jabcli.inspection import inspection
    from jabcli.runs.runs import Run
    from jabcli.training import checkpoints, manifest, training

    monkeypatch.setattr(runtime, "caching", True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # not the cache other tests share
    traced = []
    shapes = training.state_shapes
    monkeypatch.setattr(
        training, "state_shapes", lambda e: traced.append(e.config.model.d_model) or shapes(e)
    )
    first = inspection.load(trained / "runs/tiny")
    again = inspection.load(trained / "runs/tiny")
    assert traced == [16]  # the second load read the shapes from disk
    assert first.params.keys() == again.params.keys()
    for module in first.params:
        for name, value in first.params[module].items():
            np.testing.assert_array_equal(value, again.params[module][name])

    experiment = first.experiment
    wider = type(experiment).create(
        dataclasses.replace(
            experiment.config,
            model=dataclasses.replace(experiment.config.model, d_model=32),
        )
    )
    assert runtime.remembered(wider, "parameter layout", lambda: "computed") == "computed"

    facts = runtime.cache_dir().parent / "facts"
    for entry in facts.glob("*.pkl"):
        entry.write_bytes(b"not a pickle")
    inspection.load(trained / "runs/tiny")
    assert traced == [16, 16]

    run = Run.open(trained / "runs/tiny")
    arrays = checkpoints.load(run, manifest.entry(run, "latest"))
    arrays.pop(next(name for name in arrays if name.startswith("params")))
    with pytest.raises(JabError, match=r"checkpoint x does not fit its config \(params\["):
        checkpoints.params_of(experiment, arrays, "checkpoint x")


def test_a_second_predict_loads_its_compiled_program_and_a_damaged_one_is_only_a_miss(
    trained, tmp_path
):
    """A warm `jab predict` neither traces nor compiles its decoding program: the first
    one kept it whole on disk. A stored program that does not read is compiled again
    and stored again, though the compilation cache holds it (that copy would not run)."""

    def predict() -> tuple[str, str]:
        result = subprocess.run(
            [sys.executable, "-m", "jabcli", "predict", "--run", trained / "runs/tiny", "1230"],
            env={**env(), "XDG_CACHE_HOME": str(tmp_path), "JAX_LOG_COMPILES": "1"},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout, result.stderr

    first, log = predict()
    assert compiling("answer", log)
    stored = list((tmp_path / "jab/programs").glob("*.bin"))
    assert len(stored) == 1
    again, log = predict()
    assert again == first
    assert "jit(answer)" not in log and "tracing answer" not in log
    stored[0].write_bytes(b"not a program")
    damaged, log = predict()
    assert damaged == first
    assert compiling("answer", log)
    # The compilation cache held it: it was compiled again without it, to be stored.
    assert stored[0].read_bytes() != b"not a program"
    again, log = predict()
    assert again == first
    assert "jit(answer)" not in log


def test_a_second_training_process_loads_its_compiled_programs_and_trains_the_same(tmp_path):
    """The first `jab train` of a config keeps its training and initialisation programs
    whole on disk; the next process that trains it traces and compiles neither, and its
    run is the same to the bit. Another version of jab (its code changed where these
    programs do not) training a config that differs only where no program does (its
    step count, its seed) compiles and stores nothing new."""

    def train(out: str, *more: str, code: Path | None = None) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "jabcli", "train", *TINY, "--steps", "60", *more, "--out", out],
            cwd=tmp_path,
            env={
                **env(),
                "XDG_CACHE_HOME": str(tmp_path / "cache"),
                "JAX_LOG_COMPILES": "1",
                **({"PYTHONPATH": str(code)} if code else {}),
            },
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        return result.stderr

    log = train("first")
    assert compiling("train_chunk", log) and compiling("init_state", log)
    assert "Finished XLA compilation of jit(train_chunk)" in log
    stored = set((tmp_path / "cache/jab/programs").glob("*.bin"))
    assert len(stored) >= 2
    log = train("second")
    assert not compiling("train_chunk", log) and not compiling("init_state", log)
    assert "jit(train_chunk)" not in log and "jit(init_state)" not in log
    another = tmp_path / "another-jab"  # its code and presets, one of its files changed
    for folder in ("jabcli", "tasks"):
        shutil.copytree(ROOT / folder, another / folder)
    with open(another / "jabcli" / "cli" / "cli.py", "a") as changed:
        changed.write("\n# another version of jab\n")
    names = set((tmp_path / "cache/jab/programs").glob("*.key"))
    # Another version of jab, training another step count with another seed: the same
    # programs, found by what they compute.
    log = train("another", "--steps", "40", "--seed", "1", code=another)
    for program in ("train_chunk", "init_state"):
        assert f"Finished XLA compilation of jit({program})" not in log
    assert set((tmp_path / "cache/jab/programs").glob("*.bin")) == stored
    assert set((tmp_path / "cache/jab/programs").glob("*.key")) > names  # its own names
    first, second = (tmp_path / name / "metrics.jsonl" for name in ("first", "second"))
    losses = [
        [r.get("loss") for r in map(json.loads, m.read_text().splitlines())]
        for m in (first, second)
    ]
    assert losses[0] == losses[1] and any(losses[0])


def test_stored_programs_past_their_disk_budget_lose_the_ones_used_longest_ago(tmp_path):
    import os

    from jabcli.core import runtime

    for age, name in enumerate(["new", "middle", "old"]):
        (tmp_path / f"{name}.bin").write_bytes(b"x" * 100)
        os.utime(tmp_path / f"{name}.bin", (1e9 - age, 1e9 - age))
        (tmp_path / f"{name}.key").write_text(f"{name}.bin")  # a config naming it
        os.utime(tmp_path / f"{name}.key", (1e9 - age, 1e9 - age))
    (tmp_path / "empty.key").write_text("")  # a name cut short: names nothing
    runtime.trim(tmp_path, 250)
    assert sorted(p.stem for p in tmp_path.glob("*.bin")) == ["middle", "new"]
    assert sorted(p.stem for p in tmp_path.glob("*.key")) == ["middle", "new"]
    runtime.trim(tmp_path, 250, names=1)  # more names than kept: the oldest go
    assert len(list(tmp_path.glob("*.bin"))) == 2
    assert [p.stem for p in tmp_path.glob("*.key")] == ["new"]


def test_a_stored_program_that_fails_its_first_run_is_removed_and_compiled_again(tmp_path):
    """jaxlib 0.10 on the CPU may give back a stored program that loads, then fails to
    run ("Function ... not found"): the answer still comes, from a program compiled here,
    and a training state handed to the failed run is still whole for it."""
    import jax
    import jax.numpy as jnp

    from jabcli.core import runtime

    def broken(x, y):
        x.delete()  # as a program that takes over its argument's buffer may have
        raise jax.errors.JaxRuntimeError("NOT_FOUND: Function broadcast_compare_fusion not found")

    stored = tmp_path / "program.bin"
    stored.write_bytes(b"a stored program")
    lower = jax.jit(lambda x, y: x * 2 + y, donate_argnums=0).lower(jnp.arange(3), 1)
    program = runtime.StoredProgram(broken, stored, lower.compile, donated=(0,))
    state = jnp.arange(3)
    np.testing.assert_array_equal(program(state, 1), [1, 3, 5])  # state was still whole
    assert not stored.exists()
    np.testing.assert_array_equal(program(jnp.arange(3) + 1, 1), [3, 5, 7])


def test_programs_that_read_different_arguments_are_stored_apart(tmp_path, monkeypatch):
    """Two programs whose text is the same once their unused argument is dropped (x*2+y
    and x*2+z) are two programs: the second config does not load the first's."""
    from types import SimpleNamespace

    import jax

    from jabcli.core import runtime

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(runtime, "caching", True)
    experiment = SimpleNamespace(  # what runtime.Keyed reads of an experiment
        config=SimpleNamespace(to_dict=dict),
        tokenizer=SimpleNamespace(tokens=[]),
        code_digest="",
        storable=True,
    )
    reads_y = jax.jit(lambda x, y, z: x * 2 + y).lower(1.0, 2.0, 100.0)
    reads_z = jax.jit(lambda x, y, z: x * 2 + z).lower(1.0, 2.0, 100.0)
    first = runtime.stored_program(experiment, "reads y", lambda: reads_y)
    second = runtime.stored_program(experiment, "reads z", lambda: reads_z)
    assert float(first(1.0, 2.0, 100.0)) == 4.0
    assert float(second(1.0, 2.0, 100.0)) == 102.0
    assert len(list((tmp_path / "jab/programs").glob("*.bin"))) == 2


def with_sha256(checkpoints: Path, name: str, data: bytes) -> None:
    """Replace a checkpoint's bytes and its checksum in the manifest alike."""
    import hashlib

    (checkpoints / name).write_bytes(data)
    manifest = json.loads((checkpoints / "manifest.json").read_text())
    for entry in manifest["checkpoints"]:
        if entry["file"] == name:
            entry["sha256"] = hashlib.sha256(data).hexdigest()
    (checkpoints / "manifest.json").write_text(json.dumps(manifest))


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


def test_junk_with_a_matching_checksum_is_corrupted_and_every_command_falls_back(
    three_checkpoints,
):
    with_sha256(three_checkpoints / "run/checkpoints", "step-00000300.npz", b"PK\x03\x04junk")
    for command in (
        ["eval", "--run", "run", "--samples", "50"],
        ["predict", "--run", "run", "012"],
    ):
        result = jab_here(*command, cwd=three_checkpoints)
        assert result.stderr == (
            "jab: note: checkpoint run/checkpoints/step-00000300.npz is corrupted (not a "
            "checkpoint file); using step 200, the newest valid checkpoint\n"
        )
    resumed = jab_here("resume", "run", "--steps", "400", cwd=three_checkpoints)
    assert "Resuming run from step 200" in " ".join(resumed.stdout.split())


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


def test_a_lost_manifest_is_rebuilt_so_a_resume_goes_on_from_the_newest_checkpoint(
    three_checkpoints,
):
    (three_checkpoints / "run/checkpoints/manifest.json").unlink()
    before = (three_checkpoints / "run/checkpoints/step-00000200.npz").read_bytes()
    result = jab_here("resume", "run", "--steps", "400", cwd=three_checkpoints)
    assert result.stderr == (
        "jab: note: run/checkpoints/manifest.json is missing, though run/checkpoints holds "
        "checkpoints; rebuilt it from the checkpoint files that pass their checks (steps 100, "
        "200, 300)\n"
    )
    said = " ".join(result.stdout.split())
    assert "Resuming run from step 300" in said  # not from 0, over the checkpoints
    assert (three_checkpoints / "run/checkpoints/step-00000200.npz").read_bytes() == before
    assert newest_step(three_checkpoints / "run") == 400


def test_a_corrupt_manifest_is_rebuilt_and_predict_still_answers(three_checkpoints):
    checkpoints = three_checkpoints / "run/checkpoints"
    before = json.loads((checkpoints / "manifest.json").read_text())
    (checkpoints / "manifest.json").write_text('{"format": 1, "checkpoi')
    listed = json.loads(jab_here("runs", ".", "--json", cwd=three_checkpoints).stdout)
    assert listed[0]["state"] == (
        "damaged: run/checkpoints/manifest.json is corrupted (not valid JSON); loading the "
        "run (jab eval, predict, resume) rebuilds it from its checkpoint files"
    )
    result = jab_here(
        "predict", "012", "--run", "run", "--checkpoint", "300", cwd=three_checkpoints
    )
    assert "012" in result.stdout
    assert result.stderr == (
        "jab: note: run/checkpoints/manifest.json is corrupted (not valid JSON); rebuilt it "
        "from the checkpoint files that pass their checks (steps 100, 200, 300); the damaged "
        "manifest is kept as manifest.json.damaged\n"
    )
    assert (checkpoints / "manifest.json.damaged").read_text() == '{"format": 1, "checkpoi'
    rebuilt = json.loads((checkpoints / "manifest.json").read_text())
    same = ("file", "step", "sha256", "eval_seq_acc", "config")
    assert [{k: e[k] for k in same} for e in rebuilt["checkpoints"]] == [
        {k: e[k] for k in same} for e in before["checkpoints"]
    ]
    assert rebuilt["best"] == before["best"]
    (row,) = json.loads(jab_here("runs", ".", "--json", cwd=three_checkpoints).stdout)
    assert row["state"] == "finished"
    again = jab_here("predict", "012", "--run", "run", cwd=three_checkpoints)
    assert again.stderr == ""  # rebuilt once, for good


@pytest.mark.parametrize(
    "manifest, damage",
    [
        (
            {"format": 1, "checkpoints": [{"file": "step-00000400.npz", "step": 400,
                                           "sha256": "0" * 64}]},
            "lists step-00000400.npz, which is missing",
        ),
        ({"format": 2, "checkpoints": []}, "is corrupted (format 2, not 1)"),
        (
            {"format": 1, "checkpoints": [{"file": "step-00000300.npz", "step": "300",
                                           "sha256": "0" * 64}]},
            "is corrupted (unexpected contents)",
        ),
    ],
    ids=["lists-a-missing-file", "unknown-format", "step-not-a-number"],
)  # fmt: skip
def test_a_manifest_that_reads_but_disagrees_with_the_files_is_rebuilt_from_them(
    three_checkpoints, manifest, damage
):
    checkpoints = three_checkpoints / "run/checkpoints"
    (checkpoints / "manifest.json").write_text(json.dumps(manifest))
    result = jab_here("predict", "012", "--run", "run", cwd=three_checkpoints)
    assert "012" in result.stdout
    assert result.stderr == (
        f"jab: note: run/checkpoints/manifest.json {damage}; rebuilt it from the checkpoint "
        "files that pass their checks (steps 100, 200, 300); the damaged manifest is kept as "
        "manifest.json.damaged\n"
    )
    rebuilt = json.loads((checkpoints / "manifest.json").read_text())
    assert [e["step"] for e in rebuilt["checkpoints"]] == [100, 200, 300]
    assert json.loads((checkpoints / "manifest.json.damaged").read_text()) == manifest


def test_a_rebuilt_manifest_leaves_out_a_damaged_checkpoint_and_deletes_nothing(
    three_checkpoints,
):
    checkpoints = three_checkpoints / "run/checkpoints"
    (checkpoints / "manifest.json").unlink()
    data = bytearray((checkpoints / "step-00000300.npz").read_bytes())
    data[len(data) // 2] ^= 0xFF  # flipped bits in an array: only its CRC-32 can tell
    (checkpoints / "step-00000300.npz").write_bytes(bytes(data))
    result = jab_here("predict", "012", "--run", "run", cwd=three_checkpoints)
    assert result.stderr.endswith(
        "rebuilt it from the checkpoint files that pass their checks (steps 100, 200); "
        "step-00000300.npz fails them and is left unlisted, not deleted\n"
    )
    assert (checkpoints / "step-00000300.npz").read_bytes() == bytes(data)
    rebuilt = json.loads((checkpoints / "manifest.json").read_text())
    assert [e["step"] for e in rebuilt["checkpoints"]] == [100, 200]


def test_a_lost_manifest_with_no_valid_checkpoint_beside_it_is_one_error_naming_the_way_out(
    three_checkpoints,
):
    (three_checkpoints / "run/checkpoints/manifest.json").write_text("")
    for step in (100, 200, 300):
        truncate(three_checkpoints / "run", step)
    result = jab_here("predict", "012", "--run", "run", cwd=three_checkpoints, check=False)
    assert result.returncode == 2
    assert result.stderr == (
        "jab: error: run/checkpoints/manifest.json is corrupted (not valid JSON), and no "
        "checkpoint file beside it passes its checks (step-00000100.npz, step-00000200.npz, "
        "step-00000300.npz); move run/checkpoints away to train anew\n"
    )
    assert not (three_checkpoints / "run/checkpoints/manifest.json.damaged").exists()


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


def test_a_ctrl_c_in_the_chunk_that_reaches_the_target_ends_the_run_at_its_target(
    trained, tmp_path
):
    """The signal lands while the run reaches its target: training is done, so the run is
    not called interrupted (whose 'Resume with' a plain resume would then refuse)."""
    import os

    from jabcli.training import session

    class CtrlCAtTheTarget(session.Observer):
        def evaluated(self, results):
            if all(r.scores["seq_acc"] >= 0.995 for r in results):
                os.kill(os.getpid(), signal.SIGINT)

    shutil.copytree(trained / "runs/tiny", tmp_path / "run")
    outcome = session.resume(tmp_path / "run", 1000, CtrlCAtTheTarget())
    assert outcome.reached_target and outcome.step < 1000
    assert outcome.interrupted_by is None
