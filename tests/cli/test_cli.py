"""The command line as a user meets it: real training, real files, and real processes
where the process is what is tested (pipes, stdin's bytes, start-up imports, completion);
elsewhere `jab_here` runs the same entry point in this process."""

import fcntl
import html
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from jabrun import TINY, env, interrupt_after, jab_here

from jabcli import __version__


def test_train_writes_config_metrics_and_a_checkpoint(trained):
    run = trained / "runs" / "tiny"
    assert (run / "config.yaml").is_file()
    manifest = json.loads((run / "checkpoints" / "manifest.json").read_text())
    assert manifest["checkpoints"][-1]["step"] == 300
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for key in ("step", "loss", "token_acc", "seq_acc", "lr", "steps_per_sec", "elapsed_s"):
        assert key in records[0]
    assert records[-1]["loss"] < records[0]["loss"] / 3


def test_eval_prints_a_table_by_length(trained):
    out = jab_here("eval", "--run", "runs/tiny", "--samples", "200", cwd=trained).stdout
    assert "exact match" in out and "By input length" in out


def test_predict_marks_answers_against_the_reference(trained):
    from jabcli.api import api

    out = jab_here("predict", "0123", "3 2 1", "--run", "runs/tiny", cwd=trained).stdout
    rows = api.load(trained / "runs/tiny").predict(["0123", "321"])
    for row in rows:  # each answer shown with the reference and the verdict it deserves
        verdict = "✓ right" if row["output"] == row["expected"] else "✗ wrong"
        assert re.search(rf"{row['input']}\s+{row['output']}\s+{row['expected']}\s+{verdict}", out)


def test_show_attention_draws_a_heatmap_and_saves_an_svg_that_fetches_nothing(trained):
    out = jab_here("show-attention", "--input", "0123", "--save", "attn.svg", cwd=trained).stdout
    assert "cross attention" in out and "head 0" in out and "head 3" in out
    svg = (trained / "attn.svg").read_text()
    assert svg.startswith("<svg") and "@font-face" not in svg and "https://" not in svg
    mean = jab_here(
        "show-attention", "--kind", "encoder", "--head", "mean", "--layer", "0", cwd=trained
    ).stdout
    assert "mean of heads" in mean


def test_same_seed_and_config_give_the_same_losses(trained, tmp_path):
    """Given again as options, or as the saved run's config.yaml (--config)."""
    jab_here("train", *TINY, "--steps", "300", "--out", "again", cwd=tmp_path)
    saved = trained / "runs/tiny/config.yaml"
    jab_here("train", "--config", saved, "--out", "like", cwd=tmp_path)

    def losses(run):
        lines = (run / "metrics.jsonl").read_text().splitlines()
        return [json.loads(line)["loss"] for line in lines]

    assert losses(tmp_path / "again") == losses(trained / "runs/tiny")
    assert losses(tmp_path / "like") == losses(trained / "runs/tiny")


def test_eval_by_length_is_far_above_chance_in_range_and_covers_exactly_the_lengths(trained):
    out = jab_here("eval", "--lengths", "1-9", "--samples", "40", "--json", cwd=trained).stdout
    result = json.loads(out)
    assert set(result["per_length"]) == {str(n) for n in range(1, 10)}
    assert all(row["samples"] == 40 for row in result["per_length"].values())
    assert result["train_lengths"] == [1, 5]
    # Chance is 25% per token and under 2% per sequence over this alphabet.
    trained_on = [result["per_length"][str(n)] for n in range(1, 6)]
    assert sum(row["token_acc"] for row in trained_on) / 5 > 0.8
    assert sum(row["seq_acc"] for row in trained_on) / 5 > 0.5


def test_compare_puts_runs_side_by_side_and_marks_the_training_range(trained):
    args = ["compare", "runs/tiny", "runs/tiny", "--lengths", "4-7", "--samples", "20"]
    table = jab_here(*args, cwd=trained).stdout
    rows = [line.split() for line in table.splitlines() if line.strip()[:1].isdigit()]
    assert [row[0] for row in rows[:4]] == ["4", "5", "6", "7"]
    assert all(row[1] == row[2] for row in rows[:4])  # the same run, the same draw
    assert rows[0][1].endswith("*") and not rows[3][1].endswith("*")  # trained on 1-5
    assert "copy, sinusoidal, 1-5" in table and "trained on lengths 1-5" in table


def test_compare_saves_a_plot_of_exact_match_by_length_a_line_per_run(trained, tmp_path):
    shutil.copytree(trained / "runs/tiny", tmp_path / "other")
    args = ["compare", trained / "runs/tiny", "other", "--lengths", "3-7", "--samples", "10"]
    shown = jab_here(*args, "--json", "--save", "c.svg", cwd=tmp_path).stdout
    assert [r["run"] for r in json.loads(shown)][1] == "other"  # stdout stays pure JSON
    picture = (tmp_path / "c.svg").read_text()
    assert "Matplotlib" in picture and "input length" in picture
    assert "tiny (sinusoidal)" in picture and "other (sinusoidal)" in picture
    refused = jab_here(*args, "--save", "c.html", cwd=tmp_path, check=False)
    assert refused.returncode == 2 and "--save writes .svg or .png files" in refused.stderr


# What users see when jab writes to a pipe or a file at a given width (COLUMNS), as when
# they redirect it; nothing a user typed, a model answered or a run is called may be cut.


def jab_at(columns: int, *args, cwd: Path, stdin: str = "") -> str:
    """`jab ...` with its output `columns` wide, as COLUMNS sets it for a pipe; its stdout."""
    return jab_here(*args, cwd=cwd, columns=columns, stdin=stdin).stdout


def copy_of_tiny(trained: Path, cwd: Path, name: str) -> str:
    shutil.copytree(trained / "runs" / "tiny", cwd / "runs" / name)
    return f"runs/{name}"


def column(table: str, header: str, after: str) -> str:
    """The text of the column headed `header` (up to the one headed `after`), its folded
    pieces joined."""
    lines = table.splitlines()
    top = next(i for i, line in enumerate(lines) if header in line.split() and after in line)
    start, end = lines[top].index(header), lines[top].index(after)
    return "".join(line[start:end].strip() for line in lines[top + 2 :])


LONG_INPUT = "0123" * 8


@pytest.fixture(scope="module")
def predicted(trained):
    """Inputs read from stdin and a long one, answered at 60 columns."""
    return jab_at(
        60, "predict", "-", LONG_INPUT, "--run", "runs/tiny", cwd=trained, stdin="0123\n\n3 2 1\n"
    )


def test_predict_reads_inputs_from_stdin_one_per_line(predicted):
    assert column(predicted, "input", "prediction").startswith("0123321")
    assert predicted.count("right") + predicted.count("wrong") == 3  # the blank line is skipped


def test_a_long_input_folds_onto_the_next_line_instead_of_being_cut(predicted):
    assert "…" not in predicted
    assert column(predicted, "input", "prediction").endswith(LONG_INPUT)


@pytest.fixture(scope="module")
def early_stop(trained, tmp_path_factory):
    """A copy of the tiny run resumed towards step 1000 at 60 columns: it reaches its
    target before that and stops there."""
    cwd = tmp_path_factory.mktemp("early")
    run = copy_of_tiny(trained, cwd, "a-long-run-folder-name-to-wrap-at-sixty")
    return run, jab_at(60, "resume", run, "--steps", "1000", cwd=cwd), cwd


def test_next_steps_are_whole_commands_on_lines_of_their_own(early_stop):
    run, out, _ = early_stop
    lines = [line.strip() for line in out.splitlines()]
    assert f"jab eval --run {run}" in lines
    assert f"jab show-attention --run {run}" in lines


def test_the_training_view_at_60_columns_cuts_nothing(early_stop):
    assert "…" not in early_stop[1]


def test_the_live_view_heads_its_training_and_held_out_columns_on_one_line(early_stop):
    assert any(
        line.split() == ["training", "batch", "held-out"] for line in early_stop[1].splitlines()
    )


def test_an_early_stop_says_target_reached_instead_of_an_eta(early_stop):
    bar = next(line for line in early_stop[1].splitlines() if "/1000" in line)
    stopped_at = int(re.search(r"(\d+)/1000", bar).group(1))
    assert stopped_at < 1000 and "target reached" in bar and "ETA" not in bar


def test_resuming_a_run_that_stopped_at_its_target_trains_nothing(early_stop):
    run, _, cwd = early_stop
    metrics = (cwd / run / "metrics.jsonl").read_text()
    result = jab_here("resume", run, cwd=cwd, check=False)
    assert result.returncode == 2
    assert "where its held-out exact match reached its target" in result.stderr
    assert result.stderr.strip().endswith(": nothing to resume")
    assert len(result.stderr.strip().splitlines()) == 1
    assert (cwd / run / "metrics.jsonl").read_text() == metrics  # not a step more


@pytest.fixture(scope="module")
def missed_target(tmp_path_factory):
    """A reverse run of 50 steps, held-out evaluated on 1 sample: it misses its target."""
    cwd = tmp_path_factory.mktemp("missed")
    args = [*TINY, "--task", "reverse", "--steps", "50", "--set", "train.eval_samples=1"]
    return cwd, jab_at(60, "train", *args, "--out", "runs/short", cwd=cwd)


def test_a_run_that_misses_its_target_suggests_resuming_with_more_steps(missed_target):
    assert "jab resume runs/short --steps 100" in [
        line.strip() for line in missed_target[1].splitlines()
    ]


def test_the_predictions_after_training_say_they_show_mistakes_first(missed_target):
    assert "Held-out predictions, mistakes first" in missed_target[1]


def test_one_held_out_sample_is_one_sample(missed_target):
    out = " ".join(missed_target[1].split())
    assert "(1 sample)" in out and "(1 samples)" not in out


def test_compare_says_when_runs_learned_different_tasks(trained, missed_target):
    short = missed_target[0] / "runs" / "short"
    out = jab_here("compare", "runs/tiny", short, "--lengths", "3-4", "--samples", "5", cwd=trained)
    assert "different tasks (copy, reverse)" in " ".join(out.stdout.split())


def test_an_interrupted_run_says_so_on_a_line_of_its_own(tmp_path):
    # Steps as in the resumed run above (one compilation); evaluated only at the end.
    args = [*TINY, "--steps", "1000", "--set", "train.eval_every=100000", "--out", "run"]
    code, out, _ = interrupt_after(["train", *args], tmp_path, Path("run"), 1)
    assert code == 130
    assert any(line.startswith("Interrupted at step ") for line in out.splitlines()), out


def test_eval_at_60_columns_names_the_run_whole_and_shrinks_its_bars(trained, tmp_path):
    run = copy_of_tiny(trained, tmp_path, "evaluated-with-a-longer-name")
    out = jab_at(60, "eval", "--run", run, "--lengths", "1-8", "--samples", "20", cwd=tmp_path)
    assert "…" not in out
    assert any(run in line for line in out.splitlines())
    assert max(map(len, out.splitlines())) <= 60


def test_a_saved_html_is_a_whole_page_as_wide_as_the_terminal(trained):
    args = ["show-attention", "--run", "runs/tiny", "--input", "0123", "--save", "whole.html"]
    jab_at(60, *args, cwd=trained)
    page = (trained / "whole.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<title>cross attention" in page
    assert "class=" not in page  # inline styles: it reads the same copied anywhere
    code = html.unescape(re.sub(r"<[^>]+>", "", page.split("<code")[1].split(">", 1)[1]))
    assert "head 3" in code and max(map(len, code.splitlines())) <= 60


@pytest.mark.parametrize(
    "command", ["", "tasks", "train", "resume", "eval", "compare", "predict", "show-attention"]
)
def test_help_answers_to_h_and_names_values_plainly(command, tmp_path):
    out = jab_here(*command.split(), "-h", cwd=tmp_path).stdout
    assert f"Usage: jab {command}".strip() in out
    assert not re.search(r"<(bool|path|str|int|list)|\{", out), out


def test_version(tmp_path):
    assert jab_here("--version", cwd=tmp_path).stdout == f"jab {__version__}\n"


def test_runs_lists_each_run_with_how_it_ended_and_skips_other_folders(trained, tmp_path):
    shutil.copytree(trained / "runs/tiny", tmp_path / "runs/tiny")
    shutil.copytree(trained / "runs/tiny", tmp_path / "runs/busy")
    (tmp_path / "runs/notes").mkdir()
    (tmp_path / "runs/notes/todo.txt").write_text("not a run")
    with open(tmp_path / "runs/busy/.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as a training process holds it
        rows = json.loads(jab_here("runs", "--json", cwd=tmp_path).stdout)
        shown = jab_here("runs", cwd=tmp_path).stdout
    by_name = {row["run"]: row for row in rows}
    assert set(by_name) == {"runs/tiny", "runs/busy"}
    assert by_name["runs/busy"]["state"] == "running"
    tiny = by_name["runs/tiny"]
    assert (tiny["task"], tiny["step"], tiny["steps"], tiny["seeds"]) == ("copy", 300, 300, 1)
    assert tiny["state"] in ("finished", "target reached")
    assert tiny["parameters"] > 1000 and tiny["created"] and tiny["train_s"] > 0
    # A step multiplies every weight by each of 32 sequences, forward and backward: at
    # least 2 x 3 x parameters x 32 operations, and not 50 steps' worth (a chunk).
    assert 6 * 32 < tiny["flops_per_step"] / tiny["parameters"] < 6 * 32 * 24
    assert 0.0 < tiny["best_eval_seq_acc"] <= 1.0
    assert "runs/tiny" in shown and "running" in shown


def test_curves_draws_a_metric_by_step_and_saves_a_picture(trained, tmp_path):
    shown = jab_here(
        "curves", "runs/tiny", "--metric", "eval_seq_acc", "--save", tmp_path / "c.svg",
        cwd=trained,
    ).stdout  # fmt: skip
    assert "held-out exact match by step" in shown and "runs/tiny" in shown
    assert "step" in shown and f"Saved {tmp_path / 'c.svg'}" in shown
    picture = (tmp_path / "c.svg").read_text()  # a plot matplotlib drew, not a screenshot
    assert "<svg" in picture and "Matplotlib" in picture and "runs/tiny" in picture
    assert "held-out exact match by step" in picture


def test_the_terminal_plot_marks_steps_with_whole_numbers():
    from jabcli.api.plots import Plot
    from jabcli.cli.pictures import CurvesView
    from jabcli.inspection.curves import Curve

    curve = Curve("r", "eval_seq_acc", [50, 60, 70, 80, 90, 100], [0.1, 0.2, 0.4, 0.6, 0.8, 1.0])
    drawn = re.sub(r"\x1b\[[0-9;]*m", "", CurvesView(Plot([curve])).draw(100, colours=False))
    lines = drawn.splitlines()
    axis = lines[next(i for i, line in enumerate(lines) if line.strip().startswith("└")) + 1]
    assert axis.split()[0] == "50" and axis.split()[-1] == "100"
    assert all(tick.isdigit() for tick in axis.split())  # not 62.5


def test_a_saved_curve_marks_the_steps_measured_and_draws_nothing_between_evaluations(trained):
    from jabcli.api import api, plots

    run = trained / "runs" / "tiny"
    measured = [
        record["step"]
        for record in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
        if "eval_seq_acc" in record
    ]
    fig, _ = plots.figure(plots.Plot(api.curves(run, "eval_seq_acc")))
    (line,) = fig.axes[0].lines
    assert list(line.get_xdata()) == measured == [100, 200, 300]
    assert line.get_marker() == "o" and line.get_markersize() > 0


def test_without_matplotlib_a_plot_file_is_one_line_naming_the_extra_and_html_still_saves(
    trained, tmp_path, monkeypatch, capsys
):
    from jabcli.api import api
    from jabcli.cli import cli

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if never installed
    monkeypatch.chdir(trained)
    for name, code in (("c.svg", 2), ("c.png", 2), ("c.html", 0)):
        with pytest.raises(SystemExit) as ended:
            cli.main(["curves", "runs/tiny", "--save", str(tmp_path / name)])
        assert ended.value.code == code
        err = capsys.readouterr().err
        assert (err.count("\n"), "pip install matplotlib" in err) == (
            (1, True) if code else (0, False)
        )
        assert (tmp_path / name).exists() == (code == 0)
    curves = api.curves("runs/tiny", "eval_seq_acc")  # in Jupyter: how to get the picture
    assert curves._repr_svg_() is None and "pip install matplotlib" in curves._repr_html_()


def test_compare_without_matplotlib_suggests_no_html_file_since_it_saves_none(
    trained, tmp_path, monkeypatch
):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if never installed
    for name in ("c.png", "c.html"):
        refused = jab_here("compare", "runs/tiny", "runs/tiny", "--save", tmp_path / name,
                           cwd=trained, check=False)  # fmt: skip
        assert refused.returncode == 2 and len(refused.stderr.splitlines()) == 1
        said = refused.stderr
        if name == "c.png":
            assert "pip install matplotlib" in said and ".html" not in said
        else:  # what the hint must not send a user to
            assert "--save writes .svg or .png files" in said


@pytest.mark.parametrize(
    "args, message",
    [
        (["--metric", "accuracy"], "unknown metric 'accuracy'; one of: loss"),
        (["--metric", "eval_seq_ac"], "(did you mean 'eval_seq_acc'?); one of: loss"),
        (["--save", "c.pdf"], "--save writes .svg, .png or .html files"),
        (["--run-without-metrics"], "has no metrics yet (nothing to draw for loss)"),
    ],
)
def test_curves_with_a_bad_metric_or_file_type_is_one_line(trained, tmp_path, args, message):
    run = "runs/tiny"
    if args == ["--run-without-metrics"]:
        shutil.copytree(trained / "runs/tiny", tmp_path / "bare")
        (tmp_path / "bare/metrics.jsonl").unlink()
        run, args = tmp_path / "bare", []
    result = jab_here("curves", run, *args, cwd=trained, check=False)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert message in result.stderr and not (trained / "c.pdf").exists()


def test_the_shell_completes_task_names_and_run_folders(trained):
    def complete(words: str) -> list[str]:
        result = subprocess.run(
            [sys.executable, "-m", "jabcli"],
            env={**env(), "_JAB_COMPLETE": "complete_bash", "COMP_WORDS": words,
                 "COMP_CWORD": str(len(words.split()) - (not words.endswith(" ")))},
            cwd=trained, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        return result.stdout.split()

    assert complete("jab train --task re") == ["reverse"]
    assert "runs/tiny" in complete("jab eval --run ")


def test_a_coupled_run_is_measured_beyond_its_lengths_also_at_the_answers_true_length(tmp_path):
    """How far coupled models generalize is the coupled study's question
    (studies/coupled.yaml); here, that `jab eval --force-length` measures one at lengths
    it never saw, each with and without the true length imposed."""
    jab_here("train", *TINY, "--set", "model.pos_encoding=coupled", "--steps", "20",
             "--out", "runs/r", cwd=tmp_path)  # fmt: skip
    args = ["--lengths", "4-9", "--samples", "10", "--force-length", "--json"]
    result = json.loads(jab_here("eval", "--run", "runs/r", *args, cwd=tmp_path).stdout)
    assert result["pos_encoding"] == "coupled" and result["train_lengths"] == [1, 5]
    assert sorted(map(int, result["per_length"])) == list(range(4, 10))
    for row in result["per_length"].values():
        assert row["samples"] == 10 and 0.0 <= row["seq_acc"] <= row["forced_seq_acc"] <= 1.0
        # the paper's score: never below the answers as written, where an early end
        # makes every later symbol wrong
        assert 0.0 <= row["symbol_acc"] <= row["forced_symbol_acc"] <= 1.0
    assert 0.0 <= result["symbol_acc"] <= result["forced_symbol_acc"] <= 1.0


def test_eval_with_forced_length_shows_both_exact_matches_by_length(trained):
    out = jab_here(
        "eval",
        "--run",
        "runs/tiny",
        "--lengths",
        "4-7",
        "--samples",
        "20",
        "--force-length",
        cwd=trained,
    ).stdout
    assert "at the true length" in out and "at true length" in out


def test_jab_tasks_and_help_answer_without_importing_jax():
    """Importing JAX takes most of a second: commands that compute nothing skip it."""
    probe = (
        "import sys\n"
        "from jabcli.cli.cli import main\n"
        "for argv in (['tasks'], ['tasks', '--json'], ['--help'], ['train', '--help']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'haiku', 'optax'))\n"
        "print('heavy:', heavy, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0 and "heavy: []" in done.stderr, done.stderr[-2000:]


def test_with_index_hints_jab_numbers_the_input_and_scores_only_the_answer_symbols(tmp_path):
    hints = ["--set", "task.index_hints=true", "--set", "train.eval_every=40"]
    jab_here("train", *TINY, *hints, "--steps", "40", "--out", "runs/h", cwd=tmp_path)
    by_length = ["--lengths", "3-6", "--samples", "10", "--json"]
    evaluated = json.loads(jab_here("eval", "--run", "runs/h", *by_length, cwd=tmp_path).stdout)
    assert sorted(evaluated["per_length"]) == ["3", "4", "5", "6"]  # symbols, not tokens
    predicted = jab_here("predict", "0123", "--run", "runs/h", cwd=tmp_path).stdout
    assert "[" not in predicted  # the answer, without the hints the model wrote
    encoder = ["--input", "0123", "--kind", "encoder", "--head", "0"]
    drawn = jab_here("show-attention", "--run", "runs/h", *encoder, cwd=tmp_path).stdout
    assert len(set(re.findall(r"\[\d+\]", drawn))) == 4  # a hint before each symbol
    assert "index hint [k] heads a column" in drawn


def test_eval_names_the_task_and_its_positional_encoding(trained):
    shown = jab_here("eval", "--run", "runs/tiny", "--samples", "20", cwd=trained).stdout
    assert "copy, sinusoidal positions" in shown


def test_a_negative_head_counts_from_the_last_as_a_negative_layer_does(trained):
    shown = jab_here("show-attention", "--run", "runs/tiny", "--head", "-1", "--input", "012",
                cwd=trained).stdout  # fmt: skip
    assert "head 3" in shown and "head 0" not in shown


def test_help_lists_each_command_with_its_whole_summary_on_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # Typer's help console reads it
    for args in (["--help"], ["study", "--help"]):
        panel = jab_here(*args, cwd=tmp_path).stdout.split("Commands")[1]
        rows = [line.strip("│ ") for line in panel.splitlines() if line.startswith("│")]
        assert rows and all(re.fullmatch(r"[a-z-]+ +[A-Z].*\.", row) for row in rows), rows


def test_help_says_what_to_pip_install_for_each_extra(tmp_path):
    def words(*args: str) -> str:  # the help's text, its box and line breaks left out
        return " ".join(w for w in jab_here(*args, cwd=tmp_path).stdout.split() if w != "│")

    assert "(pip install matplotlib)" in words("curves", "--help")
    assert "needs pip install ray." in words("study", "run", "--help")
    assert "(pip install tensorboardX)" in words("export", "--help")
    assert "group" not in jab_here("predict", "--help", cwd=tmp_path).stdout


@pytest.mark.parametrize("args", [["tasks"], ["tasks", "--json"], ["--help"]])
def test_a_pipe_closed_early_is_no_failure_for_pipefail_scripts(args, tmp_path):
    """As `| head -1` once it has its line: a pipe whose reader is already gone."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run([sys.executable, "-m", "jabcli", *args], cwd=tmp_path, env=env(),
                                stdout=write_end, stderr=subprocess.PIPE, text=True)  # fmt: skip
    finally:
        os.close(write_end)
    assert result.returncode == 0 and result.stderr == ""


@pytest.mark.parametrize(
    "encoding, args, drawn",
    [
        ("ascii", ["tasks"], ["+=====", "| name ", "Deletang et al."]),
        (
            "latin-1",  # bars and a chart by length, ✗ for the lengths beyond training
            ["eval", "--run", "runs/tiny", "--lengths", "1-8", "--samples", "10"],
            ["  ####", "== trained on lengths 1-5   -- beyond training", "x wrong"],
        ),
    ],
)
def test_a_stdout_that_cannot_encode_jabs_drawing_gets_ascii_stand_ins_not_a_traceback(
    trained, encoding, args, drawn
):
    result = subprocess.run([sys.executable, "-m", "jabcli", *args], cwd=trained,
                            env={**env(), "PYTHONIOENCODING": encoding},
                            capture_output=True)  # fmt: skip
    assert (result.returncode, result.stderr.decode()) == (0, "")
    out = result.stdout.decode(encoding)
    for piece in drawn:
        assert piece in out, piece


# Trained as the session's tiny run is: tests that ask for `trained` (made first) find
# its programs in the session's compilation cache.
AS_TRAINED = [*TINY, "--steps", "300"]


def test_training_goes_on_to_its_end_when_its_reader_goes_away(trained, tmp_path):
    args = " ".join([*AS_TRAINED, "--out", "piped"])
    command = f"set -o pipefail; {sys.executable} -m jabcli train {args} | head -1"
    result = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env(),
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "piped/checkpoints/manifest.json").read_text())
    assert manifest["checkpoints"][-1]["step"] == 300


def test_no_runs_is_an_empty_list_not_an_error(tmp_path):
    shown = jab_here("runs", cwd=tmp_path)
    assert "No runs under runs/" in shown.stdout
    assert json.loads(jab_here("runs", "--json", cwd=tmp_path).stdout) == []


def test_jab_runs_lists_a_run_given_itself_studies_by_name_and_a_run_without_its_config(
    trained, tmp_path
):
    shown = jab_here("runs", trained / "runs/tiny", cwd=tmp_path).stdout
    assert "tiny" in shown and "No runs" not in shown  # the run given is listed
    (tmp_path / "only/astudy").mkdir(parents=True)
    (tmp_path / "only/astudy/study.json").write_text("{}")
    shown = jab_here("runs", "only", cwd=tmp_path).stdout
    assert "No runs but studies under only/: only/astudy" in " ".join(shown.split())
    shutil.copytree(trained / "runs/tiny", tmp_path / "lost")
    (tmp_path / "lost/config.yaml").unlink()
    (row,) = json.loads(jab_here("runs", ".", "--json", cwd=tmp_path).stdout)
    assert row["run"] == "lost" and row["state"] == "damaged: lost/config.yaml is missing"


def test_curves_of_every_folder_skip_a_study_and_name_each_of_many_runs(trained, tmp_path):
    for n in range(13):
        shutil.copytree(trained / "runs/tiny", tmp_path / f"runs/r{n:02}")
    (tmp_path / "runs/astudy").mkdir()
    (tmp_path / "runs/astudy/study.json").write_text("{}")
    folders = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "runs").iterdir())
    shown = jab_here("curves", *folders, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "jab: note: runs/astudy is a study: skipped" in shown.stderr
    assert all(f"runs/r{n:02}" in shown.stdout for n in range(13))  # in the legend


def test_a_run_is_named_by_argument_or_by_run_option_alike(trained, tmp_path):
    run = trained / "runs/tiny"
    by_argument = jab_here("eval", run, "--samples", "20", "--json", cwd=tmp_path).stdout
    by_option = jab_here("eval", "--run", run, "--samples", "20", "--json", cwd=tmp_path).stdout
    assert json.loads(by_argument) == json.loads(by_option)
    drawn = jab_here("curves", "--run", run, "--run", run, cwd=tmp_path)
    assert drawn.returncode == 0 and drawn.stdout.count("tiny") >= 2
    shutil.copytree(run, tmp_path / "other")
    both = jab_here("eval", run, "--run", "other", cwd=tmp_path, check=False)
    assert both.returncode == 2 and "name the run once" in both.stderr
    folder = jab_here("predict", run, "0123", cwd=tmp_path, check=False)
    assert folder.returncode == 2
    assert f"is a folder, not an input; name a run with --run {run}" in folder.stderr


def test_curves_without_colour_tell_runs_apart_by_their_markers(trained, tmp_path):
    shutil.copytree(trained / "runs/tiny", tmp_path / "other")
    shown = jab_here("curves", trained / "runs/tiny", "other", cwd=tmp_path).stdout  # NO_COLOR=1
    assert "●● " in shown and "++ " in shown


def predict_stdin(trained, data: bytes, *args) -> subprocess.CompletedProcess:
    return jab_here("predict", "--run", "runs/tiny", "-", *args, cwd=trained, stdin=data,
                    check=False)  # fmt: skip


def test_predict_reads_stdin_with_a_byte_order_mark_and_names_bytes_that_are_not_text(trained):
    answered = predict_stdin(trained, b"\xef\xbb\xbf0123\n")
    assert answered.returncode == 0 and "0123" in answered.stdout
    refused = predict_stdin(trained, b"01\n\xff\xfe\n")
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "jab: error: stdin is not UTF-8 text (line 2 has the byte 0xff)"
    )


def test_predict_answers_inputs_typed_beside_the_dash_too(trained):
    answered = predict_stdin(trained, b"", "012")
    assert answered.returncode == 0 and "012" in answered.stdout


def test_predict_from_stdin_answers_the_good_lines_and_names_each_bad_line(trained):
    data = f"0123\n12a3\n\n3 2 1\n{'0' * 1100}\n".encode()
    answered = predict_stdin(trained, data)
    assert answered.returncode == 2
    alone = jab_here("predict", "0123", "321", "--run", "runs/tiny", cwd=trained)
    assert answered.stdout == alone.stdout  # the good lines, as if given alone
    assert answered.stderr.splitlines() == [
        "jab: error: line 2: input '12a3' has characters outside the alphabet '0123': 'a'",
        "jab: error: line 5: an input of length 1100 needs 1101 positions, but the model "
        "takes at most model.max_positions = 1024 (sinusoidal encoding)",
    ]
    typed = jab_here("predict", "0123", "12a3", "--run", "runs/tiny", cwd=trained, check=False)
    assert typed.returncode == 2 and "0123" in typed.stdout
    assert typed.stderr == (
        "jab: error: input '12a3' has characters outside the alphabet '0123': 'a'\n"
    )


@pytest.mark.parametrize(
    "args",
    [["predict", "0123"], ["eval", "--samples", "5", "--json"], ["show-attention", "--input", "0"]],
    ids=["predict", "eval", "show-attention"],
)
def test_a_command_without_run_says_which_run_it_used(trained, args):
    chosen = jab_here(*args, cwd=trained)
    assert chosen.stderr == "Using runs/tiny (copy), the newest run; choose one with --run\n"
    assert jab_here(*args, "--run", "runs/tiny", cwd=trained).stderr == ""


def test_the_live_training_table_at_40_columns_cuts_no_label(tmp_path):
    result = jab_here("train", *TINY, "--steps", "50", "--out", "narrow", cwd=tmp_path, columns=40)
    assert "…" not in result.stdout and "token" in result.stdout


def test_tables_at_40_columns_split_no_word_of_their_headers(trained):
    predicted = jab_at(40, "predict", "--run", "runs/tiny", "0123", "01233210", cwd=trained)
    assert "prediction" in predicted and "reference" in predicted
    mistakes = jab_at(40, "eval", "--run", "runs/tiny", "--lengths", "7-8", "--samples", "5",
                      cwd=trained)  # fmt: skip
    assert "expected" in mistakes
    runs = ["runs/tiny"] * 3
    compared = jab_at(40, "compare", *runs, "--lengths", "4-6", "--samples", "5", cwd=trained)
    assert "copy, sinusoidal, 1-5" in compared  # (the narrow layout: runs, then lengths)
    assert re.search(r"length 6: (runs/tiny \S+%,? ){3}", " ".join(compared.split()) + " ")


def test_a_run_stopped_before_its_first_step_leaves_no_empty_live_table(tmp_path, monkeypatch):
    import signal

    from jabcli.cli import live

    begin = live.TrainView.begin

    def begin_then_ctrl_c(view, *args, **kwargs):
        begin(view, *args, **kwargs)
        # (Training's own handler takes it, not pytest's, which would end the session.)
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
        os.kill(os.getpid(), signal.SIGINT)  # the user presses Ctrl-C while it compiles

    monkeypatch.setattr(live.TrainView, "begin", begin_then_ctrl_c)
    result = jab_here("train", *TINY, "--steps", "50", "--out", "run", cwd=tmp_path, check=False)
    assert result.returncode == 130, result.stderr
    assert "Interrupted at step 0" in result.stdout
    assert "learning rate" not in result.stdout  # the live table of dashes


def test_a_plot_jab_draws_leaves_a_notebooks_matplotlib_backend_as_it_was(trained):
    import matplotlib

    from jabcli.api import api, plots

    before = matplotlib.get_backend()
    matplotlib.use("svg")  # as a notebook sets its own (inline) backend
    try:
        picture = plots.picture(plots.Plot(api.curves(trained / "runs/tiny", "loss")), "svg")
        assert b"<svg" in picture and matplotlib.get_backend() == "svg"
    finally:
        matplotlib.use(before)


def test_training_in_a_terminal_draws_its_live_view_and_finishes(trained, tmp_path):
    """In a terminal (a pseudo-terminal here) jab draws its live view, which pipes never
    see: the main job must finish there too."""
    import pty
    import select

    master, terminal = pty.openpty()
    args = [*AS_TRAINED, "--out", "run"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "jabcli", "train", *args],
        cwd=tmp_path, env={**env(), "TERM": "xterm"},
        stdin=terminal, stdout=terminal, stderr=terminal,
    )  # fmt: skip
    os.close(terminal)
    shown, deadline = b"", time.time() + 180
    while time.time() < deadline:
        if select.select([master], [], [], 0.5)[0]:
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # the terminal's other end closed: jab has ended
                break
            shown += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    text = shown.decode(errors="replace")
    try:
        assert proc.wait(timeout=30) == 0, text
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"jab train did not finish in a terminal: {text}")
    assert "steps/s" in text and "Run summary" in text


def rendered(view, columns: int) -> list[str]:
    """The lines of a Rich renderable `columns` wide, without colour."""
    import io

    from rich.console import Console

    out = Console(width=columns, file=io.StringIO(), no_color=True)
    out.print(view)
    return out.file.getvalue().splitlines()


def test_the_chart_by_length_labels_round_lengths_evenly_spaced():
    """`jab eval --lengths 41-500`: 50 100 150 ..., not 41 65 89 113 145."""
    from jabcli.cli.tables import LengthChart

    per_length = {n: {"seq_acc": 0.0} for n in range(41, 501)}
    lines = rendered(LengthChart(per_length, (1, 16)), 100)
    axis = next(i for i, line in enumerate(lines) if line.startswith("  0% "))
    ticks = list(map(int, lines[axis + 1].split()))
    assert len(ticks) >= 4 and ticks[0] % 50 == 0
    assert len({ticks[i + 1] - ticks[i] for i in range(len(ticks) - 1)}) == 1  # evenly


def test_the_terminal_plot_marks_round_steps_and_keeps_its_legend_off_a_narrow_plot():
    from jabcli.api.plots import Plot
    from jabcli.cli.pictures import CurvesView
    from jabcli.inspection.curves import Curve

    lengths = list(range(41, 501))
    curves = [Curve(name, "eval_seq_acc", lengths, [0.5] * len(lengths)) for name in "ab"]
    lines = rendered(CurvesView(Plot(curves)), 100)
    bottom = next(i for i, line in enumerate(lines) if line.strip().startswith("└"))
    ticks = list(map(int, lines[bottom + 1].split()))
    assert all(tick % 100 == 0 for tick in ticks)  # 100 200 ..., not 41 133 225
    narrow = rendered(CurvesView(Plot(curves)), 40)
    bottom = next(i for i, line in enumerate(narrow) if line.strip().startswith("└"))
    assert not any("●● a" in line for line in narrow[:bottom])  # nothing over the curves
    assert "●● a" in narrow[-1] and "++ b" in narrow[-1]  # the legend, under the plot


def test_a_saved_loss_within_a_decade_labels_its_log_axis_with_plain_numbers():
    """A loss from 4.2 to 0.6: 0.6 ... 4, not 6x10^-1 ... 4x10^0."""
    from jabcli.api import plots
    from jabcli.inspection.curves import Curve

    steps = list(range(0, 300, 25))
    losses = [4.2 * 0.84**i for i in range(len(steps))]
    fig, _ = plots.figure(plots.Plot([Curve("g", "loss", steps, losses)]))
    fig.canvas.draw()
    axes = fig.axes[0]
    low, high = axes.get_ylim()
    labels = [
        t.get_text()
        for t in axes.get_yticklabels(which="both")
        if t.get_text() and low <= t.get_position()[1] <= high
    ]
    assert axes.get_yscale() == "log" and len(labels) >= 3
    assert all(re.fullmatch(r"\d+(\.\d+)?", label) for label in labels), labels


def test_compare_notes_on_stderr_when_runs_of_one_task_draw_from_different_alphabets(
    trained, tmp_path
):
    other = [*TINY, "--steps", "10", "--out", "three"]
    other[other.index("task.alphabet=0123")] = "task.alphabet=012"
    jab_here("train", *other, cwd=tmp_path)
    args = ["compare", trained / "runs/tiny", "three", "--lengths", "3-4", "--samples", "5"]
    result = jab_here(*args, cwd=tmp_path)
    assert result.stderr.strip() == (
        "jab: note: these runs draw inputs from different alphabets (0123, 012): each is "
        "measured on inputs of its own alphabet, not on the same inputs"
    )
    same = jab_here("compare", "runs/tiny", "runs/tiny", "--lengths", "3-4", "--samples", "5",
                    cwd=trained)  # fmt: skip
    assert same.stderr == ""


def evaluates_predicts_and_compares(tmp_path: Path, run: str, arch: str) -> None:
    """`jab eval` (its JSON and its table), `predict` and `compare` on a copy run of
    model.arch=`arch` trained to step 40, each naming the form."""
    args = ["--lengths", "3-7", "--samples", "10", "--force-length", "--json"]
    result = json.loads(jab_here("eval", "--run", run, *args, cwd=tmp_path).stdout)
    assert result["step"] == 40 and sorted(map(int, result["per_length"])) == [3, 4, 5, 6, 7]
    assert result["arch"] == arch
    for row in result["per_length"].values():
        assert row["samples"] == 10 and 0.0 <= row["seq_acc"] <= row["forced_seq_acc"] <= 1.0
    shown = jab_here("eval", "--run", run, "--samples", "5", cwd=tmp_path).stdout
    assert f"copy, sinusoidal positions, {arch}-only" in shown
    predicted = jab_here("predict", "0123", "321", "--run", run, cwd=tmp_path).stdout
    assert re.search(r"0123\s+\S*\s+0123\s+[✓✗]", predicted)
    compared = jab_here("compare", run, run, "--lengths", "4-5", "--samples", "5",
                        cwd=tmp_path).stdout  # fmt: skip
    assert f"copy, sinusoidal, {arch}-only, 1-5" in compared  # told from other forms


def test_an_encoder_form_run_trains_evaluates_predicts_and_draws_attention(tmp_path):
    """model.arch=encoder, the paper's Transformer: every command that works on a run
    works on one; its attention is the encoder's over the input and the answer's slots."""
    form = ["--set", "model.arch=encoder", "--set", "model.num_layers=2"]
    trained = jab_here("train", *TINY, *form, "--steps", "30", "--out", "runs/e", cwd=tmp_path)
    assert "Training copy (lengths 1-5, sinusoidal, encoder-only) into runs/e" in trained.stdout
    jab_here("resume", "runs/e", "--steps", "40", cwd=tmp_path)
    listed = jab_here("runs", "runs", cwd=tmp_path).stdout
    assert "sinusoidal, encoder-only" in listed
    assert json.loads(jab_here("runs", "runs", "--json", cwd=tmp_path).stdout)[0]["arch"] == (
        "encoder"
    )
    evaluates_predicts_and_compares(tmp_path, "runs/e", "encoder")
    drawn = jab_here("show-attention", "--run", "runs/e", "--input", "0123", "--head", "0",
                     cwd=tmp_path).stdout  # fmt: skip
    assert "encoder attention, layer 1" in drawn
    # Queries: 0 1 2 3 <eos>, then the five slots, each with the token it wrote.
    assert len(re.findall(r"^│\s*□", drawn, re.M)) == 5 and "□ = an answer slot" in drawn
    from jabcli.api import api

    picture = api.load(tmp_path / "runs/e").attention("0123", layer=0)
    assert picture.kind == "encoder" and picture.weights.shape == (4, 10, 10)
    assert picture.cols == [*"0123", "<eos>", *"□□□□□"]
    refused = jab_here("show-attention", "--run", "runs/e", "--kind", "cross", cwd=tmp_path,
                       check=False)  # fmt: skip
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "model.arch=encoder run has no cross attention" in refused.stderr


def test_a_decoder_form_run_trains_evaluates_predicts_and_draws_attention(tmp_path):
    """model.arch=decoder, a decoder-only Transformer: every command that works on a run
    works on one; its attention is the one causal self-attention over input and answer."""
    form = ["--set", "model.arch=decoder", "--set", "model.num_layers=2"]
    trained = jab_here("train", *TINY, *form, "--steps", "30", "--out", "runs/d", cwd=tmp_path)
    assert "Training copy (lengths 1-5, sinusoidal, decoder-only) into runs/d" in trained.stdout
    jab_here("resume", "runs/d", "--steps", "40", cwd=tmp_path)
    assert "sinusoidal, decoder-only" in jab_here("runs", "runs", cwd=tmp_path).stdout
    evaluates_predicts_and_compares(tmp_path, "runs/d", "decoder")
    drawn = jab_here("show-attention", "--run", "runs/d", "--input", "0123", "--head", "0",
                     cwd=tmp_path).stdout  # fmt: skip
    assert "decoder attention, layer 1" in drawn
    from jabcli.api import api

    picture = api.load(tmp_path / "runs/d").attention("0123", layer=0)
    assert picture.kind == "decoder"
    # Keys: the input and its <eos>, then <bos> and the answer fed back; queries: the
    # input, then what each answer step wrote. Nothing reads a later token.
    answer = len(picture.rows) - 5
    assert picture.cols[:6] == [*"0123", "<eos>", "<bos>"] and picture.rows[:5] == picture.cols[:5]
    assert picture.weights.shape == (4, 5 + answer, 5 + answer)
    assert np.all(np.triu(picture.weights, 1) == 0)
    refused = jab_here("show-attention", "--run", "runs/d", "--kind", "cross", cwd=tmp_path,
                       check=False)  # fmt: skip
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "model.arch=decoder run has no cross attention" in refused.stderr


def test_a_decoder_form_group_interrupted_and_resumed_ends_bitwise_equal_to_an_uninterrupted_one(
    tmp_path,
):
    group = [*TINY, "--set", "model.arch=decoder", "--seeds", "3", "--steps", "150",
             "--set", "train.log_every=25"]  # fmt: skip
    jab_here("train", *group, "--out", "whole", cwd=tmp_path)
    # Ctrl-C at step 50 of 150: the signal lands mid-run
    code, _out, err = interrupt_after(["train", *group, "--out", "cut"], tmp_path,
                                      Path("cut/seed-2"), 2)  # fmt: skip
    assert code == 130, err
    assert len((tmp_path / "cut/seed-2/metrics.jsonl").read_text().splitlines()) < 6
    jab_here("resume", "cut", cwd=tmp_path)
    for seed in range(3):
        whole, cut = (tmp_path / name / f"seed-{seed}" for name in ("whole", "cut"))
        records = [(run / "metrics.jsonl").read_text().splitlines() for run in (whole, cut)]
        assert len(records[0]) == 6
        strip = [[{k: v for k, v in json.loads(line).items() if k not in ("steps_per_sec",
                  "elapsed_s")} for line in lines] for lines in records]  # fmt: skip
        assert strip[0] == strip[1]
        final = [np.load(run / "checkpoints/step-00000150.npz") for run in (whole, cut)]
        assert final[0].files == final[1].files
        for name in final[0].files:
            np.testing.assert_array_equal(final[0][name], final[1][name], err_msg=name)
