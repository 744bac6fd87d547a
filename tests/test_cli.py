"""The command line, run as a user runs it: real subprocesses, real training, real files."""

import json

from jabrun import TINY, jab


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
    out = jab("eval", "--run", "runs/tiny", "--samples", "200", cwd=trained).stdout
    assert "exact match" in out and "By input length" in out


def test_predict_marks_answers_against_the_reference(trained):
    out = jab("predict", "0123", "3 2 1", "--run", "runs/tiny", cwd=trained).stdout
    assert "0123" in out and "321" in out
    assert "right" in out or "wrong" in out


def test_show_attention_draws_a_heatmap_and_saves_svg(trained):
    out = jab("show-attention", "--input", "0123", "--save", "attn.svg", cwd=trained).stdout
    assert "cross attention" in out and "head 0" in out and "head 3" in out
    assert (trained / "attn.svg").read_text().startswith("<svg")
    mean = jab(
        "show-attention", "--kind", "encoder", "--head", "mean", "--layer", "0", cwd=trained
    ).stdout
    assert "mean of heads" in mean


def test_same_seed_and_config_give_the_same_losses(trained):
    jab("train", *TINY, "--steps", "300", "--out", "runs/again", cwd=trained)

    def losses(name):
        lines = (trained / "runs" / name / "metrics.jsonl").read_text().splitlines()
        return [json.loads(line)["loss"] for line in lines]

    assert losses("again") == losses("tiny")


def test_eval_by_length_is_far_above_chance_in_range_and_covers_exactly_the_lengths(trained):
    out = jab("eval", "--lengths", "1-9", "--samples", "40", "--json", cwd=trained).stdout
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
    table = jab(*args, cwd=trained).stdout
    rows = [line.split() for line in table.splitlines() if line.strip()[:1].isdigit()]
    assert [row[0] for row in rows[:4]] == ["4", "5", "6", "7"]
    assert all(row[1] == row[2] for row in rows[:4])  # the same run, the same draw
    assert rows[0][1].endswith("*") and not rows[3][1].endswith("*")  # trained on 1-5
    assert "copy, sinusoidal, 1-5" in table and "trained on lengths 1-5" in table
