"""What jab prints, pinned: `jab --help` and every command's help, and the output and exit
code of commands given wrong input and of a few given right input on the suite's tiny run,
compared whole with tests/cli/golden/cli.txt. Only what legitimately varies from one session
to the next is normalised (the session's folder, times, jab's version), and, in what the
tiny run's commands print, every decimal figure: a loss or an accuracy is a fact about
this machine's floating-point rounding over 300 steps, not about what jab prints.

After a change meant to alter what jab prints, write the file again and read its diff:
    JAB_PIN=write pytest tests/cli/test_cli_pinned.py
"""

import os
import re
import shutil
from pathlib import Path

import pytest
from jabrun import jab_here

from jabcli import __version__

GOLDEN = Path(__file__).parent / "golden" / "cli.txt"
RUN = "runs/tiny"

HELP = [
    [],
    ["study"],
    *[
        [*command.split(), "--help"]
        for command in [
            "",
            "tasks",
            "runs",
            "train",
            "resume",
            "eval",
            "compare",
            "predict",
            "show-attention",
            "curves",
            "export",
            "study",
            "study run",
            "study show",
        ]
    ],
    ["--version"],
]

STUDY = """
base:
  task: copy
  steps: 60
  set: {task.max_len: 4, model.d_model: 16}
evaluate: {lengths: 1-5, samples: 5}
"""
STUDY_FILES = {
    "unknown-key.yaml": STUDY + "parameters: {model.pos_encodng: [rope]}\n",
    "bad-value.yaml": STUDY + "parameters: {model.pos_encoding: [rop]}\n",
    "no-values.yaml": STUDY + "parameters: {model.pos_encoding: []}\n",
    "no-cells.yaml": STUDY,
    "empty.yaml": "",
    "bins.yaml": STUDY.replace("samples: 5}", "samples: 5, bins: [1-3, 10-20]}")
    + "rows: [{name: a}]\n",
    "same-folder.yaml": STUDY + "rows: [{name: a}, {name: a}]\n",
    "row-key.yaml": STUDY + "rows: [{name: a, sets: {}}]\n",
    "seeds.yaml": STUDY + "seeds: 0\nrows: [{name: a}]\n",
    "section.yaml": STUDY + "evaluat: {}\nrows: [{name: a}]\n",
    "lengths.yaml": STUDY.replace("1-5", "5-x") + "rows: [{name: a}]\n",
    "not-a-mapping.yaml": "- a\n- b\n",
    "steps.yaml": STUDY.replace("steps: 60", "steps: many") + "rows: [{name: a}]\n",
    "good.yaml": STUDY + "rows: [{name: a}]\n",
}

WRONG = [
    ["trian"],
    ["train", "--tsk", "copy"],
    ["train", "--bogus"],
    ["train", "--task", "revers"],
    ["train", "--task", "nothere.yaml"],
    ["train", "--task", "copy", "--set", "train.lr=0.1"],
    ["train", "--task", "copy", "--set", "model.d_modle=64"],
    ["train", "--task", "copy", "--set", "model=3"],
    ["train", "--task", "copy", "--set", "model.d_model"],
    ["train", "--task", "copy", "--set", "model.d_model=0"],
    ["train", "--task", "copy", "--set", "model.d_model=wide"],
    ["train", "--task", "copy", "--set", "task.min_len=9", "--set", "task.max_len=3"],
    ["train", "--task", "copy", "--set", "train.learning_rate=1e309"],
    ["train", "--task", "copy", "--set", "model.pos_encoding=rotary"],
    ["train", "--task", "copy", "--set", "task.modulus=7"],
    ["train", "--task", "copy", "--set", "train.log_to=tensorbord"],
    ["train", "--task", "copy", "--set", "train.batch_size=33"],
    ["train", "--task", "copy", "--steps", "abc"],
    ["train", "--task", "copy", "--steps", "-5"],
    ["train", "--task", "copy", "--steps"],
    ["train", "--task", "copy", "--out", "afile"],
    ["train", "--config", "wrongtype.yaml"],
    ["train", "--resume", "--task", "copy"],
    ["train", RUN],
    ["resume", "runs/nothere"],
    ["eval", "--run", "runs/nothere"],
    ["eval", "--run", "afile"],
    ["eval", "--run", RUN, "--lengths", "5-x"],
    ["eval", "--run", RUN, "--lengths", "9-3"],
    ["eval", "--run", RUN, "--lengths", "1-5", "--min-len", "2"],
    ["eval", "--run", RUN, "--samples", "0"],
    ["eval", "--run", RUN, "--seed", "-1"],
    ["eval", "--run", RUN, "--checkpoint", "17"],
    ["compare", RUN],
    ["compare", RUN, RUN, "--lengths", "x"],
    ["predict", "--run", RUN, "12x"],
    ["predict", "--run", RUN, " "],
    ["predict", "--run", RUN],
    ["show-attention", "--run", RUN, "--kind", "self"],
    ["show-attention", "--run", RUN, "--layer", "3"],
    ["show-attention", "--run", RUN, "--head", "9"],
    ["show-attention", "--run", RUN, "--save", "a.png"],
    ["curves", RUN, "--metric", "nope"],
    ["curves", RUN, "--save", "nofolder/a.svg"],
    ["runs", "rnus"],
    ["runs", "afile"],
    ["export", RUN],
    ["tasks", "--jsn"],
    ["study", "run"],
    ["study", "run", "nothere.yaml"],
    ["study", "run", "good.yaml", "--ray"],
    ["study", "run", "good.yaml", "--workers", "0"],
    ["study", "run", "good.yaml", "--cpus-per-cell", "2"],
    ["study", "show", "nothere"],
    ["study", "show", RUN, "--json", "--markdown"],
    ["study", "show", RUN, "--metric", "seq_ac"],
    ["study", "nope"],
    *[["study", "run", name] for name in STUDY_FILES if name != "good.yaml"],
]

RIGHT = [
    ["tasks"],
    ["tasks", "--json"],
    ["runs"],
    ["runs", "--json"],
    ["eval", "--run", RUN, "--samples", "20"],
    ["eval", "--run", RUN, "--samples", "20", "--json"],
    ["eval", "--run", RUN, "--lengths", "1-7", "--samples", "10", "--force-length"],
    ["eval", "--samples", "10", "--checkpoint", "200"],
    ["predict", "--run", RUN, "0123", "3210", "12"],
    ["compare", RUN, RUN, "--lengths", "1-6", "--samples", "10"],
    ["show-attention", "--run", RUN, "--input", "0123"],
    ["show-attention", "--run", RUN, "--input", "0123", "--head", "mean", "--kind", "encoder"],
    ["curves", RUN],
    ["curves", RUN, "--metric", "eval_seq_acc"],
]


@pytest.fixture(scope="module")
def folder(trained, tmp_path_factory):
    """The tiny run beside the wrong things the commands are given."""
    cwd = tmp_path_factory.mktemp("pinned")
    shutil.copytree(trained / RUN, cwd / RUN)
    (cwd / "afile").write_text("not a folder")
    (cwd / "wrongtype.yaml").write_text("model:\n  d_model: wide\n")
    for name, text in STUDY_FILES.items():
        (cwd / name).write_text(text)
    return cwd


def normalised(text: str, cwd: Path) -> str:
    text = text.replace(str(cwd), "<cwd>").replace(__version__, "<version>")
    text = re.sub(r"\b20\d\d-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?\S*", "<time>", text)
    text = re.sub(r'("(created|train_s)": )[^,}\n]+', r"\1<t>", text)
    if re.search(r"\d+ (s|min) training", text):  # `jab runs`: its time sizes the columns
        text = re.sub(r"\d+ (s|min) training", "<t> training", text)
        text = re.sub("  +", "  ", re.sub("─+", "─", text))
    return "\n".join(line.rstrip() for line in text.splitlines())


def transcript(cases: list[list[str]], cwd: Path, figures: bool = False) -> str:
    """The commands' exit codes and output; with `figures`, decimals as <n>."""
    parts = []
    for args in cases:
        result = jab_here(*args, cwd=cwd, check=False)
        out, err = (normalised(text, cwd) for text in (result.stdout, result.stderr))
        if figures:
            out, err = (re.sub(r"\d+\.\d+(e-?\d+)?", "<n>", text) for text in (out, err))
        parts.append(
            f"$ jab {' '.join(args)}\n[exit {result.returncode}]\n"
            f"--- stdout\n{out}\n"
            f"--- stderr\n{err}\n"
        )
    return "\n".join(parts)


def test_help_wrong_input_and_right_input_print_what_they_printed(folder, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")  # Typer's help console reads it
    monkeypatch.setenv("TERM", "dumb")
    now = "\n".join(
        f"=== {name}\n{transcript(cases, folder, figures=name == 'right input')}"
        for name, cases in [("help", HELP), ("wrong input", WRONG), ("right input", RIGHT)]
    )
    if os.environ.get("JAB_PIN") == "write":
        GOLDEN.write_text(now)
    assert now == GOLDEN.read_text()
