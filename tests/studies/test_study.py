"""`jab study`: a grid of runs, trained in worker processes, measured at every length,
resumable, shown as a table and a plot (on Ray: test_ray_backend.py)."""

import json
import os
import re
import shutil
import signal
from pathlib import Path

import pytest
from jabrun import (
    CELLS,
    ONE_CELL,
    SMOKE_TEXT,
    TINY_BASE,
    interrupt_when,
    jab,
    jab_here,
    one_cell,
    results,
)

from jabcli.core.errors import JabError
from jabcli.studies.study_file import read

ROOT = Path(__file__).resolve().parents[2]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_study_trains_every_cell_into_a_run_folder_and_tables_each_length_bin(smoke):
    cwd, shown = smoke
    assert "Study smoke" in shown and "1-5" in shown
    shown = json.loads(jab_here("study", "show", "runs/smoke", "--json", cwd=cwd).stdout)
    assert [c["name"] for c in shown["cells"]] == [c.replace("-", " ") for c in CELLS]
    assert shown["bins"] == ["1-5", "6-8"]
    for cell in shown["cells"]:
        assert cell["state"] == "measured" and cell["seeds"] == 2 and cell["step"] == 100
        assert set(cell["per_length"]) == {str(n) for n in range(1, 9)}
        low, mid, high = (cell["bins"]["1-5"][k] for k in ("min", "median", "max"))
        assert 0.0 <= low <= mid <= high <= 1.0
    for cell in CELLS:  # each seed's figures under its own seed
        record = json.loads((cwd / "runs/smoke" / cell / "evaluation.json").read_text())
        assert [s["seed"] for s in record["seeds"]] == [0, 1]
    listed = json.loads(jab_here("runs", "runs/smoke", "--json", cwd=cwd).stdout)
    assert sorted(Path(r["run"]).name for r in listed) == sorted(CELLS)
    assert all(r["seeds"] == 2 and r["state"] in ("finished", "target reached") for r in listed)


def test_study_show_prints_markdown_and_saves_the_plot(smoke, tmp_path):
    cwd, _ = smoke
    markdown = jab_here("study", "show", "runs/smoke", "--markdown", cwd=cwd).stdout
    assert "| copy randomized | 100 |" in markdown and "|---|" in markdown
    shown = jab_here("study", "show", "runs/smoke", "--save", tmp_path / "study.svg", cwd=cwd)
    assert "input length" in shown.stdout and "trained on 1-5" in shown.stdout
    assert "<svg" in (tmp_path / "study.svg").read_text()  # matplotlib's, or the terminal's
    scored = jab_here("study", "show", "runs/smoke", "--markdown", "--metric", "symbol_acc",
                      cwd=cwd).stdout  # fmt: skip
    assert scored.startswith("Per-symbol accuracy of the answers as written by input length")
    results = json.loads(jab_here("study", "show", "runs/smoke", "--json", cwd=cwd).stdout)
    first = results["cells"][0]["symbol_bins"]["1-5"]["median"]
    assert "| copy randomized | 100 |" in scored and f"{100 * first:.1f}%" in scored
    wrong = jab_here("study", "show", "runs/smoke", "--metric", "symbols", cwd=cwd, check=False)
    assert wrong.returncode == 2 and "(did you mean 'symbol_acc'?)" in wrong.stderr
    unforced = jab_here("study", "show", "runs/smoke", "--metric", "forced_symbol_acc", cwd=cwd,
                        check=False)  # fmt: skip
    assert unforced.returncode == 2 and unforced.stderr.strip() == (
        "jab: error: --metric forced_symbol_acc needs answers decoded at their true length: "
        "runs/smoke was measured without evaluate.force_length: true"
    )


# The config keys of jab when the first study folders were measured (e14df94): every key
# added since must be in specs.ADDED_LATER, or those folders' cells would rerun.
KEYS_WHEN_STUDIES_BEGAN = {
    "task": {"alphabet", "held_out", "index_hints", "max_len", "min_len", "name",
             "reverse_answer", "shift"},
    "model": {"activation", "d_ff", "d_model", "dropout", "max_positions", "norm",
              "num_heads", "num_layers", "pos_encoding", "src_pos_encoding",
              "tgt_pos_encoding"},
    "train": {"batch_size", "clip_norm", "eval_every", "eval_samples", "keep_checkpoints",
              "learning_rate", "log_every", "log_to", "pack", "seed", "seeds", "steps",
              "target_seq_acc", "warmup_steps", "weight_decay"},
}  # fmt: skip


def test_a_config_key_added_to_jab_reruns_no_cell_of_a_study_measured_before_it(tmp_path):
    """Keys added since studies began (task.modulus, model.loops) are left out of a cell's
    spec at their defaults: the spec is the digest of the config as jab wrote it then."""
    from jabcli.core.settings import Config
    from jabcli.studies import specs

    now = Config().to_dict()
    added = {(part, key) for part, keys in now.items() for key in keys}
    added -= {(part, key) for part, keys in KEYS_WHEN_STUDIES_BEGAN.items() for key in keys}
    assert added == set(specs.ADDED_LATER)
    study = read(write(tmp_path / "m.yaml", TINY_BASE + "rows: [{name: a}]\n"))
    specs.check(study)
    config = {
        part: {k: v for k, v in keys.items() if k in KEYS_WHEN_STUDIES_BEGAN[part]}
        for part, keys in study.cells[0].resolved.to_dict().items()
    }
    config["train"].pop("log_to")  # where logs go decides no result
    before = {"task": study.cells[0].written, "config": config,
              "evaluate": study.evaluation.measure()}  # fmt: skip
    assert study.cells[0].spec == specs.digest(before)
    changed = read(
        write(tmp_path / "n.yaml", TINY_BASE + "rows: [{name: a, set: {model.loops: 2}}]\n")
    )
    specs.check(changed)
    assert changed.cells[0].spec != study.cells[0].spec


def test_rerunning_a_finished_study_trains_nothing(smoke):
    cwd, _ = smoke
    before = results(cwd / "runs/smoke")
    again = jab_here("study", "run", cwd / "smoke.yaml", cwd=cwd)
    assert "0 cells to run" in again.stdout
    assert results(cwd / "runs/smoke") == before


def test_a_study_folder_given_as_a_run_points_to_study_show(smoke):
    cwd, _ = smoke
    result = jab_here("eval", "--run", "runs/smoke", cwd=cwd, check=False)
    assert result.returncode == 2
    assert "runs/smoke is a study, not a run: see it with jab study show runs/smoke" in (
        result.stderr
    )


def test_an_interrupted_study_resumes_to_the_same_results(smoke, tmp_path):
    cwd, _ = smoke

    def started() -> bool:  # a cell is past its first steps
        metrics = tmp_path.glob("runs/again/*/seed-*/metrics.jsonl")
        return any(path.stat().st_size for path in metrics)

    study = one_cell(tmp_path)
    code, out, err = interrupt_when(
        ["study", "run", study, "--out", "runs/again"], tmp_path, started
    )
    assert code == 130, err
    assert "Resume with:" in out and "--out runs/again" in out
    assert not list(tmp_path.glob("runs/again/**/*.tmp-*"))  # nothing half-written
    assert not list(tmp_path.glob("runs/again/*/seed-*/.lock"))  # every worker stopped
    jab_here("study", "run", study, "--out", "runs/again", cwd=tmp_path)
    logs = "".join(p.read_text() for p in tmp_path.glob("runs/again/logs/*.log"))
    assert re.search(r"Resuming runs/again/\S+ from step [1-9]", logs)  # not retrained
    assert "no checkpoint yet" not in logs  # a cell that had not begun just began
    again = results(tmp_path / "runs/again", ONE_CELL)
    assert again == results(cwd / "runs/smoke", ONE_CELL)


def test_a_failing_cell_is_reported_and_the_others_still_finish(tmp_path):
    study = write(
        tmp_path / "mixed.yaml",
        TINY_BASE
        + """
rows:
  - name: fine
  - name: diverges
    set: {train.learning_rate: 1.0e+30, train.warmup_steps: 0}
""",
    )
    result = jab_here("study", "run", study, cwd=tmp_path, check=False)
    assert result.returncode == 1
    assert "cell 'diverges' failed: loss became non-finite" in result.stderr
    shown = json.loads(jab_here("study", "show", "runs/mixed", "--json", cwd=tmp_path).stdout)
    states = {c["name"]: c["state"] for c in shown["cells"]}
    assert states["fine"] == "measured"
    assert states["diverges"].startswith("failed: loss became non-finite")
    write(study, study.read_text().replace("1.0e+30", "1.0e-3"))  # the fix: retrained afresh
    jab_here("study", "run", study, cwd=tmp_path)
    shown = json.loads(jab_here("study", "show", "runs/mixed", "--json", cwd=tmp_path).stdout)
    assert [c["state"] for c in shown["cells"]] == ["measured", "measured"]


def test_editing_a_started_study_is_refused_unless_given_a_new_folder(smoke, tmp_path):
    study = copy_of_smoke(smoke, tmp_path, SMOKE_TEXT.replace("steps: 100", "steps: 90"))
    refused = jab_here("study", "run", study, cwd=tmp_path, check=False)
    assert refused.returncode == 2
    assert (
        f"cell 'copy randomized' in runs/smoke was measured with other training settings than "
        f"{study} now gives it (train.steps 100 -> 90)" in refused.stderr
    )
    assert results(tmp_path / "runs/smoke") == results(smoke[0] / "runs/smoke")  # nothing lost
    write(study, SMOKE_TEXT.replace("model.d_ff: 32", "model.d_ff: 48"))
    refused = jab_here("study", "run", study, cwd=tmp_path, check=False)
    assert "(model.d_ff 32 -> 48)" in refused.stderr


def test_changing_only_how_a_study_measures_keeps_every_cells_training(smoke, tmp_path):
    study = copy_of_smoke(smoke, tmp_path, SMOKE_TEXT.replace("samples: 10", "samples: 12"))
    again = jab_here("study", "run", study, cwd=tmp_path).stdout
    assert "2 cells to run" in again
    for cell in ("copy randomized", "reverse randomized"):
        assert f"{cell}: measured again, its training kept (evaluate.samples 10 -> 12)" in again
    before, after = results(smoke[0] / "runs/smoke"), results(tmp_path / "runs/smoke")
    assert {k: v for k, v in after.items() if isinstance(k, tuple)} == {
        k: v for k, v in before.items() if isinstance(k, tuple)
    }  # every seed's metrics as they were: nothing trained
    shown = json.loads(jab_here("study", "show", "runs/smoke", "--json", cwd=tmp_path).stdout)
    assert shown["samples_per_length"] == 12
    assert [c["state"] for c in shown["cells"]] == ["measured"] * 2
    measured = {p: p.stat().st_mtime_ns for p in tmp_path.glob("runs/smoke/*/evaluation.json")}
    rebinned = SMOKE_TEXT.replace("samples: 10", "samples: 12").replace("[1-5, 6-8]", "[1-2, 3-8]")
    again = jab_here("study", "run", write(study, rebinned), cwd=tmp_path).stdout
    assert "0 cells to run" in again and "1-2" in again and "3-8" in again
    assert measured == {p: p.stat().st_mtime_ns for p in measured}  # nothing measured again
    shown = jab_here("study", "show", "runs/smoke", "--bins", "1-4,5-8", cwd=tmp_path).stdout
    assert "1-4" in shown and "5-8" in shown and "1-2" not in shown
    wide = jab_here("study", "show", "runs/smoke", "--bins", "1-9", cwd=tmp_path, check=False)
    assert wide.stderr.strip() == (
        "jab: error: --bins: 1-9 reaches outside the lengths measured (1-8, evaluate.lengths)"
    )


def test_a_study_measured_before_specs_left_out_the_bins_stays_measured(smoke, tmp_path):
    from jabcli.studies import specs

    study = copy_of_smoke(smoke, tmp_path)
    folder = tmp_path / "runs/smoke"
    record = json.loads((folder / "study.json").read_text())
    checked = read(study)
    specs.check(checked)
    for entry in record["cells"]:  # as jab wrote them then: the bins in the spec
        legacy = json.loads((folder / entry["folder"] / "evaluation.json").read_text())
        cell = next(c for c in checked.cells if c.folder == entry["folder"])
        entry["spec"] = specs.digest({**cell.trained, "evaluate": record["evaluate"]})
        del entry["train_spec"]
        legacy["spec"] = entry["spec"]
        (folder / entry["folder"] / "evaluation.json").write_text(json.dumps(legacy))
    (folder / "study.json").write_text(json.dumps(record))
    assert "0 cells to run" in jab_here("study", "run", study, cwd=tmp_path).stdout
    assert results(folder) == results(smoke[0] / "runs/smoke")


def test_a_started_cell_given_more_steps_trains_on_and_one_trained_otherwise_says_why(
    smoke, tmp_path
):
    study = copy_of_smoke(smoke, tmp_path, SMOKE_TEXT.replace("[copy, reverse]", "[copy]"))
    cell = tmp_path / "runs/smoke/copy-randomized"
    (cell / "evaluation.json").unlink()  # trained, not yet measured: as if interrupted
    longer = jab_here("study", "run", write(study, study.read_text().replace(
        "steps: 100", "steps: 150")), cwd=tmp_path).stdout  # fmt: skip
    assert "copy randomized: its training is kept (train.steps 100 -> 150)" in longer
    logs = (tmp_path / "runs/smoke/logs/copy-randomized.log").read_text()
    assert "Resuming runs/smoke/copy-randomized from step 100" in logs
    assert json.loads((cell / "evaluation.json").read_text())["step"] == 150
    (cell / "evaluation.json").unlink()
    # A setting the training program takes as input: trained again without compiling.
    slower = study.read_text().replace("train.log_every: 25", "train.log_every: 25\n    "
                                       "train.learning_rate: 0.002")  # fmt: skip
    again = jab_here("study", "run", write(study, slower), cwd=tmp_path).stdout
    said = again.index("copy randomized: trains again from step 0, its training settings "
                       "changed (train.learning_rate 0.005 -> 0.002)")  # fmt: skip
    assert said < again.index("done copy randomized")
    assert json.loads((cell / "evaluation.json").read_text())["step"] == 150


def test_a_ctrl_c_after_every_cell_ended_interrupts_nothing(smoke, tmp_path):

    from jabcli.studies import study_run

    # One cell to measure again (one worker), the other left as it was.
    copy_only = SMOKE_TEXT.replace("[copy, reverse]", "[copy]")
    study = copy_of_smoke(smoke, tmp_path, copy_only.replace("samples: 10", "samples: 11"))

    class CtrlCAtTheEnd(study_run.StudyObserver):
        def finished(self, cell, evaluation) -> None:
            os.kill(os.getpid(), signal.SIGINT)  # the last cell: the user presses Ctrl-C just then

    summary = study_run.run(read(study), tmp_path / "runs/smoke", observer=CtrlCAtTheEnd())
    assert summary.interrupted_by is None and len(summary.measured) == 1


@pytest.mark.parametrize(
    "text, message",
    [
        (
            TINY_BASE + "parameters: {model.pos_encodng: [rope]}\n",
            "unknown config key 'model.pos_encodng'",
        ),
        (TINY_BASE + "parameters: {model.pos_encoding: [rop]}\n", "cell 'rop'"),
        (TINY_BASE + "parameters: {model.pos_encoding: []}\n", "must list its values"),
        (TINY_BASE, "has no cells"),
        ("", "bad.yaml is empty"),
        (
            TINY_BASE.replace("samples: 5}", "samples: 5, bins: [1-3, 10-20]}")
            + "rows: [{name: a}]\n",
            "evaluate.bins: 10-20 reaches outside the lengths measured (1-5, evaluate.lengths)",
        ),
        (TINY_BASE + "rows: [{name: a}, {name: a}]\n", "would share the folder 'a'"),
        (TINY_BASE + "rows: [{name: a, sets: {}}]\n", "unknown key 'sets' (did you mean 'set'?)"),
        (TINY_BASE + "seeds: 0\nrows: [{name: a}]\n", "seeds must be a whole number"),
        (
            TINY_BASE + "seeds: 3000000000\nrows: [{name: a}]\n",
            "seeds must be a whole number from 1 to 2147483648, got 3000000000",
        ),
        (TINY_BASE + "evaluat: {}\nrows: [{name: a}]\n", "(did you mean 'evaluate'?)"),
        (  # lengths its model cannot take: refused, not cut short
            TINY_BASE + "evaluate: {lengths: 1-5000}\nrows: [{name: a}]\n",
            "cell 'a': evaluate.lengths goes up to 5000, but its model takes inputs of at most "
            "1023 symbols (model.max_positions = 1024); lower the one or raise the other",
        ),
    ],
)
def test_a_bad_study_file_is_one_line_naming_what_is_wrong(tmp_path, text, message):
    study = write(tmp_path / "bad.yaml", text)
    result = jab_here("study", "run", study, cwd=tmp_path, check=False)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()  # nothing made


def test_bad_study_options_are_refused_before_anything_runs(tmp_path):
    study = write(tmp_path / "s.yaml", TINY_BASE + "rows: [{name: a}]\n")
    for args, message in [
        (["--workers", "0"], "--workers must be at least 1"),
        (["--ray", "127.0.0.1:1"], "could not reach the Ray cluster at 127.0.0.1:1"),
        (["--cpus-per-cell", "2"], "--cpus-per-cell and --gpus-per-cell go with --ray"),
    ]:
        # Ray's client is left in this process only by a real process's attempt.
        run = jab if "--ray" in args else jab_here
        result = run("study", "run", study, *args, cwd=tmp_path, check=False)
        assert result.returncode == 2 and message in result.stderr, result.stderr
    (tmp_path / "runs" / "s").mkdir(parents=True)
    (tmp_path / "runs" / "s" / "notes.txt").write_text("mine")
    taken = jab_here("study", "run", study, cwd=tmp_path, check=False)
    assert "already exists and is not a study folder" in taken.stderr
    missing = jab_here("study", "show", "runs/nothing", cwd=tmp_path, check=False)
    assert "study folder 'runs/nothing' does not exist" in missing.stderr


def test_grid_and_rows_make_cells_named_by_their_values(tmp_path):
    study = read(
        write(
            tmp_path / "g.yaml",
            """
base: {task: reverse, steps: 50, set: {task.max_len: 8}}
seeds: 3
parameters:
  task.name: {values: [copy, sort]}
  model.pos_encoding: {values: [rope, alibi]}
rows:
  - {name: sort none/randomized, task: sort, steps: 70,
     set: {model.src_pos_encoding: none, model.tgt_pos_encoding: randomized}}
evaluate: {lengths: 1-32, bins: [1-8, 9-32]}
""",
        )
    )
    assert [c.folder for c in study.cells] == [
        "copy-rope",
        "copy-alibi",
        "sort-rope",
        "sort-alibi",
        "sort-none-randomized",
    ]
    assert [c.task for c in study.cells] == ["copy", "copy", "sort", "sort", "sort"]
    assert study.cells[0].values == {
        "task.max_len": 8,
        "train.steps": 50,
        "model.pos_encoding": "rope",
    }
    assert study.cells[-1].values["train.steps"] == 70
    assert all(c.seeds == 3 for c in study.cells)
    assert study.evaluation.bins == ((1, 8), (9, 32))
    with pytest.raises(JabError, match=r"evaluate.bins takes a range"):
        read(
            write(
                tmp_path / "b.yaml",
                "base: {task: copy}\nrows: [{name: a}]\nevaluate: {bins: [x]}\n",
            )
        )


def copy_of_smoke(smoke, tmp_path: Path, text: str | None = None) -> Path:
    """The finished smoke study in a folder of its own, its file as `text` (default: as
    it is), to change without training anything again."""
    shutil.copytree(smoke[0] / "runs/smoke", tmp_path / "runs/smoke")
    return write(tmp_path / "smoke.yaml", SMOKE_TEXT if text is None else text)


def test_a_cell_dropped_from_the_file_keeps_its_results_and_comes_back_as_it_was(smoke, tmp_path):
    both = SMOKE_TEXT
    study = copy_of_smoke(smoke, tmp_path, both.replace("[copy, reverse]", "[copy]"))
    assert "0 cells to run" in jab_here("study", "run", study, cwd=tmp_path).stdout
    shown = json.loads(jab_here("study", "show", "runs/smoke", "--json", cwd=tmp_path).stdout)
    assert [c["state"] for c in shown["cells"]] == ["measured"] * 2  # the file's and the rest
    write(study, both)
    assert "0 cells to run" in jab_here("study", "run", study, cwd=tmp_path).stdout
    assert results(tmp_path / "runs/smoke") == results(smoke[0] / "runs/smoke")


def test_study_mistakes_on_the_command_line_point_to_the_right_help(tmp_path):
    missing = jab_here("study", "run", "nothere.yaml", cwd=tmp_path, check=False)
    assert missing.stderr.strip() == "jab: error: study file 'nothere.yaml' does not exist"
    bare = jab_here("study", "run", cwd=tmp_path, check=False)
    assert bare.returncode == 2 and "(see 'jab study run --help')" in bare.stderr


def shown_table(results: dict, columns: int) -> str:
    """`jab study show`'s table of `results` (as study_results.table gives them), `columns` wide."""
    import io

    from rich.console import Console

    from jabcli.cli.tables import study_table

    out = Console(width=columns, file=io.StringIO(), no_color=True)
    out.print(study_table(results))
    return out.file.getvalue()


def table_of(*cells: dict) -> dict:
    return {"study": "s", "folder": "runs/s", "samples_per_length": 5, "lengths": [1, 8],
            "bins": ["1-5"], "force_length": False, "cells": list(cells)}  # fmt: skip


def measured_cell(name: str, longest: dict) -> dict:
    figure = {"median": 0.5, "min": 0.25, "max": 0.75}
    return {"name": name, "seeds": 2, "steps": 60, "state": "measured", "step": 60,
            "train_s": 3.0, "bins": {"1-5": figure},
            "longest_at_half": longest}  # fmt: skip


def test_a_failed_cells_error_is_a_line_of_its_own_and_keeps_the_table_at_80_columns():
    error = ("failed: loss became non-finite between steps 0 and 30 (seed 0); stopped, no "
             "checkpoint had been saved yet. Try a smaller train.learning_rate")  # fmt: skip
    failed = {"name": "diverges", "seeds": 2, "steps": 60, "state": error}
    shown = shown_table(table_of(measured_cell("fine", spread([2, 3])), failed), 80)
    lines = shown.splitlines()
    header = next(line for line in lines if "≥ 50% up to" in line)
    assert "1-5" in header  # a table, not the narrow layout's lines
    row = next(i for i, line in enumerate(lines) if line.split()[:1] == ["diverges"])
    assert lines[row].split()[1:] == ["-", "-"]  # nothing measured: no figure
    folded = " ".join(line.strip() for line in lines[row + 2 :] if line.strip())
    assert error in folded  # whole, under the cell's name
    narrow = shown_table(table_of(failed), 30)
    assert "≥ 50% up to" not in narrow and "failed: loss became" in narrow


def spread(values: list[int]) -> dict:
    import statistics

    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def test_the_longest_length_at_half_over_an_even_number_of_seeds_is_a_whole_length():
    """Two seeds answering half of the inputs up to lengths 1 and 2: the median of 1.5 is
    no length; the table (and its JSON) say 1, the lower of the two."""
    from jabcli.studies.study_results import measured

    def seed(longest: int) -> dict:
        return {"per_length": {str(n): {"seq_acc": 1.0 if n <= longest else 0.0}
                               for n in range(1, 6)}}  # fmt: skip

    def longest_of(*seeds: int) -> dict:
        result = {"step": 60, "train_s": 3.0, "eval_s": 1.0, "longest": 5,
                  "train_lengths": [1, 5], "pos_encoding": "none",
                  "seeds": [seed(n) for n in seeds]}  # fmt: skip
        return measured(result, [(1, 5)])["longest_at_half"]

    assert longest_of(1, 2) == {"median": 1, "min": 1, "max": 2}
    shown = shown_table(table_of(measured_cell("fine", longest_of(1, 2))), 120)
    assert "1 [1-2]" in shown and "1.5" not in shown
    assert longest_of(1, 3, 5)["median"] == 3


def test_export_of_a_study_folder_writes_every_cells_seeds_and_skips_cells_not_trained(
    smoke, tmp_path
):
    pytest.importorskip("tensorboardX")
    copy_of_smoke(smoke, tmp_path)
    folder = tmp_path / "runs/smoke"
    (folder / CELLS[1] / "seed-1" / "metrics.jsonl").write_text("")  # as a cell failed early
    result = jab_here("export", "runs/smoke", "--tensorboard", cwd=tmp_path)
    for cell, seed in [(CELLS[0], 0), (CELLS[0], 1), (CELLS[1], 0)]:
        run = folder / cell / f"seed-{seed}"
        assert f"Wrote {run.relative_to(tmp_path)}/events.out.tfevents." in result.stdout
        assert len(list(run.glob("events.out.tfevents.*"))) == 1
    skipped = f"runs/smoke/{CELLS[1]}/seed-1"
    assert result.stderr.strip() == f"jab: note: {skipped} has no metrics yet: skipped"
    assert not list((tmp_path / skipped).glob("events.out.tfevents.*"))
