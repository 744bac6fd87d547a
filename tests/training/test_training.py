"""Training never loses a run: Ctrl-C, SIGTERM and kill -9 at any moment, resumes that end
bit-equal to a run trained straight, and numerics that go bad (jabcli/training/)."""

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
from damage import newest_step
from jabrun import TINY, compiling, env, interrupt_after, jab_here

# Long enough for a signal sent at its second to fifth log line (steps 50-125) to land
# part-way, with a second or more to spare: a tiny model trains about 500 steps a second.
LONG = [*TINY, "--steps", "600", "--set", "train.log_every=25"]


def checkpoint(run: Path, step: int) -> dict:
    data = (run / "checkpoints" / f"step-{step:08d}.npz").read_bytes()
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


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
    jab_here("train", *TINY, *chunk, "--steps", "20", "--out", "before", cwd=tmp_path)
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
