"""jab from Python (`import jabcli as jab`): the calls the command line makes, as values
that render themselves in Jupyter."""

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from jabrun import TINY_OVERRIDES, env
from jabrun import jab_here as cli

import jabcli as jab


def test_the_api_evaluates_predicts_and_draws_as_the_command_line_does(trained):
    run = jab.load(trained / "runs/tiny")
    result = run.evaluate(lengths=(1, 5), samples=50)
    printed = json.loads(
        cli(
            "eval", "--run", "runs/tiny", "--lengths", "1-5", "--samples", "50", "--json",
            cwd=trained,
        ).stdout
    )  # fmt: skip
    assert result["seq_acc"] == printed["seq_acc"]
    assert {str(n): row["seq_acc"] for n, row in result["per_length"].items()} == {
        n: row["seq_acc"] for n, row in printed["per_length"].items()
    }
    assert "<table>" in result._repr_html_()
    (answer,) = run.predict(["0123"])
    assert answer["expected"] == "0123" and answer["correct"] == (answer["output"] == "0123")
    attention = run.attention("0123", kind="cross", layer=-1)
    assert attention.weights.shape == (4, len(attention.rows), len(attention.cols))
    assert np.allclose(attention.weights.sum(-1), 1.0, atol=1e-4)
    assert 'title="' in attention._repr_html_()
    assert run.metrics()[-1]["step"] == 300
    (curve,) = run.curve("eval_seq_acc")
    assert curve.steps[-1] == 300 and "<svg" in run.curve("eval_seq_acc")._repr_svg_()


def test_the_api_compares_and_draws_curves_as_the_command_line_does(trained):
    both = [trained / "runs/tiny", trained / "runs/tiny"]
    compared = jab.compare(both, lengths=(2, 4), samples=20)
    printed = json.loads(
        cli(
            "compare", "runs/tiny", "runs/tiny", "--lengths", "2-4", "--samples", "20", "--json",
            cwd=trained,
        ).stdout
    )  # fmt: skip
    assert [r["per_length"][3]["seq_acc"] for r in compared] == [
        r["per_length"]["3"]["seq_acc"] for r in printed
    ]
    assert compared._repr_html_().count("<tr>") == 1 + 3  # a header and lengths 2-4
    (loss,) = jab.curves([trained / "runs/tiny"], "loss")
    assert loss.steps == [r["step"] for r in run_metrics(trained) if "loss" in r]


def run_metrics(trained):
    return jab.load(trained / "runs/tiny").metrics()


def test_the_api_trains_a_run_the_command_line_can_read_and_the_same_model_again_at_once(
    tmp_path,
):
    from jabcli.experiment.resolve import resolve
    from jabcli.training import training

    sets = TINY_OVERRIDES  # programs compiled already
    run = jab.train("copy", steps=50, seed=0, overrides=sets, out=tmp_path / "api")
    assert run.path == tmp_path / "api" and run.metrics()[-1]["step"] == 50
    assert json.loads(cli("eval", "--run", "api", "--json", cwd=tmp_path).stdout)["step"] == 50
    # The same config again in this Python session: its programs are not compiled again,
    # and it trains the same; nor are they for more steps at another learning rate (the
    # schedule's numbers are the program's input).
    before = training.compiled_of.cache_info()
    again = jab.train("copy", steps=50, seed=0, overrides=sets, out=tmp_path / "again")
    other = {**sets, "train.learning_rate": 1e-3, "train.warmup_steps": 10}
    longer = jab.train("copy", steps=60, seed=0, overrides=other, out=tmp_path / "longer")
    after = training.compiled_of.cache_info()
    assert after.hits == before.hits + 2 and after.misses == before.misses
    assert longer.metrics()[-1]["step"] == 60
    timing = ("steps_per_sec", "elapsed_s")
    assert [{k: v for k, v in m.items() if k not in timing} for m in again.metrics()] == [
        {k: v for k, v in m.items() if k not in timing} for m in run.metrics()
    ]
    same = [f"{k}={v}" for k, v in sets.items()]
    assert resolve("copy", sets=same, steps=50) == resolve("copy", sets=same, steps=50)
    assert resolve("copy", sets=same) != resolve("copy", sets=[*same, "model.d_ff=64"])


def test_api_mistakes_raise_jab_error_with_the_command_lines_message(tmp_path):
    with pytest.raises(jab.JabError, match=r"does not exist"):
        jab.load(tmp_path / "missing")
    with pytest.raises(jab.JabError, match=r"unknown config key 'model.width'"):
        jab.train("copy", overrides={"model.width": 3}, out=tmp_path / "never")
    assert not (tmp_path / "never").exists()


def test_api_arguments_are_checked_as_the_command_line_checks_them(tmp_path):
    with pytest.raises(jab.JabError, match=r"^steps must be a whole number of at least 1, got 1.5"):
        jab.train("copy", steps=1.5, out=tmp_path / "never")
    assert not (tmp_path / "never").exists()


def test_api_errors_name_the_calls_arguments_not_the_command_lines_options(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    for call, message in [
        (lambda: jab.train("copy", out=tmp_path / "full"), "choose another out"),
        (lambda: jab.train("copy", overrides={"model.d_model": 0.5}), "in overrides"),
        (lambda: jab.train("copy", overrides={"task.modulus": 3}), "overrides"),
    ]:
        with pytest.raises(jab.JabError, match=re.escape(message)) as raised:
            call()
        assert "--" not in str(raised.value), raised.value


def test_ctrl_c_in_the_api_saves_the_run_and_raises_instead_of_returning(tmp_path):
    tiny = TINY_OVERRIDES
    script = (
        "import jabcli as jab\n"
        f"jab.train('copy', steps=100000, overrides={tiny!r}, out='r')\n"
        "print('carried on')\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path, env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    metrics = tmp_path / "r" / "metrics.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if metrics.exists() and metrics.read_text().count("\n") >= 2:
            proc.send_signal(signal.SIGINT)
            break
        time.sleep(0.05)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode != 0 and "carried on" not in out
    assert "KeyboardInterrupt: training interrupted at step" in err
    assert "jab resume r" in err
    assert json.loads((tmp_path / "r/checkpoints/manifest.json").read_text())["checkpoints"]


def test_api_calls_check_their_arguments_and_take_runs_wherever_paths_go(trained):
    run = jab.load(trained / "runs/tiny")
    for bad, message in [
        ({"samples": -5}, "samples must be a whole number of at least 1, got -5"),
        ({"samples": 0}, "samples must be a whole number of at least 1, got 0"),
        (
            {"lengths": "1-x"},
            "lengths takes a range like 1-64, shortest first (or one length like 17), got '1-x'",
        ),
        ({"lengths": (1, 2, 3)}, "lengths takes (shortest, longest)"),
        ({"checkpoint": 1.5}, "checkpoint takes 'best', 'latest' or a step number"),
    ]:
        with pytest.raises(jab.JabError, match="^" + re.escape(message)):  # no CLI option
            run.evaluate(**bad)
    assert run.evaluate(lengths="2-3", samples=5)["per_length"].keys() == {2, 3}
    assert run.evaluate(lengths=4, samples=5, checkpoint=200)["step"] == 200
    (row,) = run.predict("0123")  # one input, not four
    assert row["input"] == "0123"
    assert len(jab.compare([run, trained / "runs/tiny"], lengths=(2, 3), samples=5)) == 2
    assert len(jab.curves(run)) == 1 and len(jab.curves([run, run])) == 2
    with pytest.raises(jab.JabError, match=r"compare takes two or more run folders"):
        jab.compare(str(trained / "runs/tiny"))
    with pytest.raises(jab.JabError, match=r"curves takes one or more run folders"):
        jab.curves([])


SMOKE = Path(__file__).resolve().parents[2] / "studies" / "smoke.yaml"
WRONG_TYPES = {
    "an int to predict": (lambda run: run.predict(12345), "inputs are strings"),
    "None to predict": (lambda run: run.predict(None), "inputs are strings"),
    "bytes to predict": (lambda run: run.predict(b"123"), "inputs are strings"),
    "ints to predict": (lambda run: run.predict([1, 2]), "inputs are strings"),
    "no inputs to predict": (lambda run: run.predict([]), "give at least one input, like run"),
    "a fraction of a layer": (
        lambda run: run.attention("0123", layer=1.5),
        "layer must be a whole number (-1 for the last), got 1.5",
    ),
    "an int to attend to": (lambda run: run.attention(123), "attention takes one input string"),
    "an int as a run": (lambda run: jab.load(5), "load takes a path (a string or a Path), got 5"),
    "an int as a Run": (lambda run: jab.Run(5), "Run takes a run folder"),
    "an int as a study": (lambda run: jab.study(3), "study takes a path"),
    "an int as a study folder": (lambda run: jab.load_study(3), "load_study takes a path"),
    "an int as a task": (lambda run: jab.train(7), "task takes a task name"),
    "overrides as --set": (
        lambda run: jab.train("copy", overrides=["model.d_model=8"]),
        "overrides takes a dict of config keys and values, like {'model.d_model': 64}",
    ),
    "steps as text": (
        lambda run: jab.train("copy", steps="10"),
        "steps must be a whole number of at least 1, got '10'",
    ),
    "an int as the out folder": (lambda run: jab.train("copy", out=1), "out takes a path"),
    "a number as text in overrides": (
        lambda run: jab.train("copy", overrides={"model.d_model": "32"}),
        "config key 'model.d_model' must be int, got str '32' in overrides",
    ),
    "a word for a flag": (
        lambda run: run.evaluate(force_length="yes"),
        "force_length takes True or False, got 'yes'",
    ),
    "a word for which checkpoint": (
        lambda run: run.evaluate(checkpoint="newest"),
        "checkpoint takes 'best', 'latest' or a step number, got 'newest'",
    ),
    "a number for a flag": (
        lambda run: run.predict("0123", skip_bad=1),
        "skip_bad takes True or False, got 1",
    ),
}


@pytest.mark.parametrize("case", WRONG_TYPES)
def test_api_wrong_argument_types_raise_jab_error_not_python_errors(
    case, trained, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # were a call to train, it would train here
    call, message = WRONG_TYPES[case]
    run = jab.load(trained / "runs/tiny")
    with pytest.raises(jab.JabError, match="^" + re.escape(message)) as raised:
        call(run)
    assert "--" not in str(raised.value)  # the API's words, not the command line's options
    assert not (tmp_path / "runs").exists()


def test_api_predict_can_answer_the_good_inputs_and_name_the_bad_ones(trained):
    run = jab.load(trained / "runs/tiny")
    with pytest.raises(jab.JabError, match="input '12a3' has characters outside the alphabet"):
        run.predict(["0123", "12a3"])
    answered = run.predict(["0123", "12a3", " "], skip_bad=True)
    assert [row["input"] for row in answered] == ["0123"]
    assert answered.skipped == {
        1: "input '12a3' has characters outside the alphabet '0123': 'a'",
        2: "an input is empty; give at least one symbol",
    }


def test_api_study_runs_its_cells_on_ray_as_jab_study_run_ray_does(tmp_path, monkeypatch):
    from jabcli.studies import study_run

    class Started(Exception):
        pass

    def run(study, out, workers, observer, ray_address, cpus_per_cell, gpus_per_cell):
        raise Started(out, workers, ray_address, cpus_per_cell, gpus_per_cell)

    monkeypatch.setattr(study_run, "run", run)
    with pytest.raises(Started) as started:
        jab.study(SMOKE, out=tmp_path / "s", ray="auto", cpus_per_cell=2, gpus_per_cell=0.5)
    assert started.value.args == (tmp_path / "s", None, "auto", 2, 0.5)
    for given, message in [
        ({"gpus_per_cell": 1}, "cpus_per_cell and gpus_per_cell go with ray"),
        ({"ray": "auto", "workers": 2}, "workers is for this machine; with ray the cluster"),
        ({"ray": "auto", "cpus_per_cell": 0}, "cpus_per_cell must be a positive number"),
        ({"ray": 5}, "ray takes an address (host:port), 'auto' or 'local', got 5"),
        ({"workers": 1.5}, "workers must be a whole number of at least 1, got 1.5"),
    ]:
        with pytest.raises(jab.JabError, match="^" + re.escape(message)):
            jab.study(SMOKE, **given)


def test_every_name_of_the_public_api_is_there_from_import_jabcli_and_from_star():
    """One list (jabcli.API): `jab.<name>` and `from jabcli.api.api import *` give the same
    names, the study calls among them."""
    namespace = {}
    exec("from jabcli.api.api import *", namespace)
    star = {name for name in namespace if not name.startswith("__")}
    assert star == set(jab.API) and {"study", "load_study", "StudyResults"} <= star
    for name in jab.API:
        assert getattr(jab, name) is namespace[name]


def test_the_api_in_a_plain_script_prints_nothing(trained, tmp_path):
    tiny = TINY_OVERRIDES
    script = (
        "import jabcli as jab\n"
        f"run = jab.train('copy', steps=20, seed=0, overrides={tiny!r}, out='r')\n"
        "run.evaluate(lengths=(1, 5), samples=10)\n"
        "run.predict(['0123'])\n"
        "run.attention('0123')\n"
        f"jab.compare(['r', {str(trained / 'runs/tiny')!r}], lengths=(1, 3), samples=5)\n"
        "jab.curves(['r'], 'loss')\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env(),
                            capture_output=True, text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (result.stdout, result.stderr) == ("", "")
    assert (tmp_path / "r/checkpoints").is_dir()
