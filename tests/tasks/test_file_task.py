"""A task from the user's own file of pairs, end to end through the command line."""

import itertools
import json

import jax
import numpy as np
import pytest
import yaml
from jabrun import jab_here

from jabcli.core.errors import JabError
from jabcli.core.tokenizer import Tokenizer
from jabcli.experiment.resolve import resolve
from jabcli.tasks.datafile import DataFile, FileTask

SMALL = [
    "--set",
    "model.d_model=32",
    "--set",
    "model.d_ff=64",
    "--set",
    "model.num_layers=1",
    "--set",
    "train.batch_size=32",
    "--set",
    "train.eval_every=100",
    "--set",
    "train.target_seq_acc=1.0",
]


def test_a_task_from_a_tsv_file_trains_evaluates_on_its_held_out_split_and_keeps_its_data(
    tmp_path,
):
    words = ["".join(w) for n in range(1, 6) for w in itertools.product("abc", repeat=n)]
    (tmp_path / "pairs.tsv").write_text("".join(f"{w}\t{w[::-1]}\n" for w in words))
    jab_here(
        "train",
        "--task",
        "file:pairs.tsv",
        "--steps",
        "300",
        *SMALL,
        "--out",
        "runs/mine",
        cwd=tmp_path,
    )
    run = tmp_path / "runs" / "mine"
    assert (run / "task-data.tsv").read_text() == (tmp_path / "pairs.tsv").read_text()
    assert "name: file:task-data.tsv" in (run / "config.yaml").read_text()
    (tmp_path / "pairs.tsv").unlink()  # the run keeps working from its own copy

    result = json.loads(jab_here("eval", "--json", cwd=tmp_path).stdout)
    assert result["samples"] == round(0.1 * len(words))  # all of the held-out split
    assert result["train_lengths"] == [1, 5]
    assert result["seq_acc"] > 0.5

    out = jab_here("predict", "abcab", "cccccccc", cwd=tmp_path).stdout
    assert "bacba" in out  # its reference answer, from the file
    assert "no reference" in out  # an input the file does not hold


def test_a_jsonl_file_gives_its_alphabet_and_lengths_to_the_config(tmp_path, monkeypatch):
    pairs = [{"input": f"{a}+{b}", "output": str(a + b)} for a in range(30) for b in range(30)]
    (tmp_path / "sums.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    monkeypatch.chdir(tmp_path)
    experiment = resolve("file:sums.jsonl", sets=["task.max_len=4"])
    cfg, task = experiment.config, experiment.task
    assert (cfg.task.alphabet, cfg.task.min_len, cfg.task.max_len) == ("+0123456789", 3, 4)
    assert task.solve("12+7") == "19" and task.solve("7+12") == "19"
    assert task.solve("99+99") is None


def test_a_data_file_over_characters_of_its_own_trains_with_them_in_its_vocabulary(
    tmp_path, monkeypatch
):
    words = ["αβ", "βγ", "γα", "ααβ", "βββ", "γβα", "αγγ", "ββα"]
    (tmp_path / "greek.tsv").write_text("".join(f"{w}\t{w.upper()}\n" for w in words))
    monkeypatch.chdir(tmp_path)
    jab_here("train", "--task", "file:greek.tsv", *SMALL, "--steps", "10", "--out", "run",
             cwd=tmp_path)  # fmt: skip
    vocab = yaml.safe_load((tmp_path / "run/config.yaml").read_text())["vocab"]
    assert set("αβγΑΒΓ") <= set(vocab)
    assert "ΑΒ" in jab_here("predict", "--run", "run", "αβ", cwd=tmp_path).stdout


def test_training_batches_never_contain_held_out_pairs(tmp_path):
    words = ["".join(w) for n in range(1, 5) for w in itertools.product("ab", repeat=n)]
    (tmp_path / "pairs.tsv").write_text("".join(f"{w}\t{w}{w}\n" for w in words))
    tok = Tokenizer()
    task = FileTask(data=DataFile.read(str(tmp_path / "pairs.tsv"), tok), held_out=0.25)
    held_out = {w for w, kept in zip(words, task.is_held_out) if kept}
    assert len(held_out) == round(0.25 * len(words))
    batch = task.sample(jax.random.PRNGKey(0), 2000, 1, 4)
    seen = {tok.decode(row) for row in np.asarray(batch.src)}
    assert seen == set(words) - held_out
    for src, out in zip(np.asarray(batch.src), np.asarray(batch.tgt_out)):
        assert tok.decode(out) == task.solve(tok.decode(src))
    evaluated = task.held_out_batch(jax.random.PRNGKey(1), 1000, 1, 4)
    assert {tok.decode(row) for row in np.asarray(evaluated.src)} == held_out


def test_a_data_file_named_in_a_task_yaml_is_found_next_to_the_yaml(tmp_path, monkeypatch):
    (tmp_path / "tasks").mkdir()
    words = ["".join(w) for n in range(1, 4) for w in itertools.product("ab", repeat=n)]
    (tmp_path / "tasks" / "rev.tsv").write_text("".join(f"{w}\t{w[::-1]}\n" for w in words))
    (tmp_path / "tasks" / "mine.yaml").write_text("task:\n  name: file:rev.tsv\n")
    monkeypatch.chdir(tmp_path)
    experiment = resolve("tasks/mine.yaml")
    assert experiment.task.solve("aab") == "baa"
    assert experiment.config.task.alphabet == "ab"


def test_a_data_file_given_without_file_prefix_gets_the_right_spelling(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rev.tsv").write_text("ab\tba\n")
    result = jab_here("train", "--task", "rev.tsv", cwd=tmp_path, check=False)
    assert result.returncode == 2
    assert "file:rev.tsv" in result.stderr


def test_a_tsv_header_and_comment_lines_are_not_trained_on(tmp_path, monkeypatch):
    words = ["".join(w) for n in range(1, 4) for w in itertools.product("ab", repeat=n)]
    lines = ["input\toutput", "# reversed words", *(f"{w}\t{w[::-1]}" for w in words)]
    (tmp_path / "rev.tsv").write_text("".join(f"{line}\n" for line in lines) + "# the end\n")
    monkeypatch.chdir(tmp_path)
    experiment = resolve("file:rev.tsv")
    assert experiment.task.answers == {w: w[::-1] for w in words}
    assert experiment.config.task.alphabet == "ab"
    (tmp_path / "caps.tsv").write_text(" Input \tOUTPUT\nab\tba\n")
    assert DataFile.read("caps.tsv", Tokenizer()).pairs == (("ab", "ba"),)


def test_a_max_len_beyond_the_data_is_refused_saying_what_the_data_holds(tmp_path, monkeypatch):
    words = ["".join(w) for n in range(1, 5) for w in itertools.product("ab", repeat=n)]
    (tmp_path / "pairs.tsv").write_text("".join(f"{w}\t{w}\n" for w in words))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(JabError, match=r"inputs are at most 4 symbols long; task.max_len 20"):
        resolve("file:pairs.tsv", sets=["task.max_len=20"])


def test_eval_beyond_the_trained_lengths_uses_every_pair_never_trained_on(tmp_path, monkeypatch):
    words = ["".join(w) for n in range(1, 7) for w in itertools.product("ab", repeat=n)]
    (tmp_path / "pairs.tsv").write_text("".join(f"{w}\t{w}\n" for w in words))
    monkeypatch.chdir(tmp_path)
    task = resolve("file:pairs.tsv", sets=["task.max_len=4"]).task
    longer = task.held_out_batch(jax.random.PRNGKey(0), 1000, 5, 6, each_length=True)
    assert len(longer.src) == 2**5 + 2**6  # all of them, held out or not
    tok = Tokenizer()
    trained = {
        tok.decode(row) for row in np.asarray(task.sample(jax.random.PRNGKey(1), 2000, 1, 4).src)
    }
    held_out = {w for w, out in zip(words, task.is_held_out) if out}
    assert trained == {w for w in words if len(w) <= 4} - held_out  # training is unchanged


def test_a_data_file_in_another_folder_trains_by_relative_or_absolute_path(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data/pairs.tsv").write_text(
        "".join(f"{n}\t{n[::-1]}\n" for n in ("12", "345", "6789"))
    )
    monkeypatch.chdir(tmp_path)
    for name in ("file:data/pairs.tsv", f"file:{tmp_path}/data/pairs.tsv"):
        assert resolve(name).task.longest == 4


def test_coupled_positions_on_a_data_file_name_the_file_that_has_no_alignment(
    tmp_path, monkeypatch
):
    (tmp_path / "pairs.tsv").write_text("ab\tba\nabc\tcba\nb\tb\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(JabError, match=r"^task file:pairs\.tsv does not say which input"):
        resolve("file:pairs.tsv", sets=["model.pos_encoding=coupled"])
