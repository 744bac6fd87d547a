"""The paper's Transformer (configs/paper_transformer.yaml): each of its code's differences
from jab's encoder form is a setting of its own, and together they train and answer as
the paper's code does. That they compute what the paper's code computes, weight for
weight, is benchmarks/chomsky_side_by_side.py's to show: the suite has no copy of it."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml
from jabrun import jab_here

from jabcli.core.tokenizer import EOS_ID, PAD_ID
from jabcli.evaluation.evaluate import HeldOut, evaluate
from jabcli.experiment.resolve import resolve
from jabcli.model.encoder_only import class_ids, counted
from jabcli.model.positions import get_scheme
from jabcli.training import training
from jabcli.training.training import cross_entropy, training_rows

ROOT = Path(__file__).resolve().parents[2]
PRESET = ROOT / "configs" / "paper_transformer.yaml"
SMALL = {"model.num_layers": 1, "model.d_model": 16, "model.d_ff": 32, "model.num_heads": 2}
SMALL |= {"train.batch_size": 16, "task.max_len": 8, "train.eval_samples": 32}


def paper(task: str, steps: int = 30, **sets):
    return resolve(task, PRESET, overrides={**SMALL, **sets}, steps=steps)


def trained(experiment):
    trainer = training.Trainer(experiment)
    trainer.run()
    return trainer.states()[0].params


def test_the_paper_study_trains_the_paper_config():
    """studies/chomsky_paper.yaml's base is configs/paper_transformer.yaml, key for key."""
    preset = yaml.safe_load(PRESET.read_text())
    keys = {
        f"{section}.{key}": value for section, part in preset.items() for key, value in part.items()
    }
    study = yaml.safe_load((ROOT / "studies" / "chomsky_paper.yaml").read_text())
    assert study["base"]["set"] == keys


def test_the_paper_form_answers_with_the_tasks_classes_and_no_eos_after_the_input():
    experiment = paper("reverse", **{"task.alphabet": "01"})
    params = trained(experiment)
    found = evaluate(experiment, params, jax.random.PRNGKey(5), HeldOut(32))
    for example in found["examples"]:
        # exactly as long as the input (its slots), of the task's own symbols
        assert len(example["output"]) == len(example["input"])
        assert set(example["output"]) <= {"0", "1"}
    batch = experiment.sample(jax.random.PRNGKey(0), 4)
    logits, _ = experiment.model.forward(params, None, batch.src, batch.tgt_in)
    classes = class_ids(experiment.config.model, experiment.task)
    answered = np.argmax(np.asarray(logits), -1)
    lengths = np.sum((np.asarray(batch.src) != PAD_ID) & (np.asarray(batch.src) != EOS_ID), 1)
    for row, length in zip(answered, lengths):
        assert set(row[:length]) <= set(classes) and row[length] == EOS_ID


def test_a_class_task_with_the_paper_options_learns_its_classes_only():
    experiment = paper("even_pairs", steps=20)
    classes = class_ids(experiment.config.model, experiment.task)
    assert sorted(experiment.tokenizer.decode(classes)) == ["0", "1"]  # no <eos>: one slot
    params = trained(experiment)
    found = evaluate(experiment, params, jax.random.PRNGKey(5), HeldOut(32))
    assert all(example["output"] in ("0", "1") for example in found["examples"])


def test_a_task_whose_answers_vary_writes_its_end_in_the_paper_form():
    experiment = paper("stack_manipulation", steps=10)
    classes = class_ids(experiment.config.model, experiment.task)
    assert EOS_ID in classes  # the paper's end marker
    params = trained(experiment)
    found = evaluate(experiment, params, jax.random.PRNGKey(5), HeldOut(32))
    assert all(set(example["output"]) <= {"0", "1"} for example in found["examples"])


def test_positions_counted_down_put_the_last_slot_at_1():
    m = paper("reverse").config.model
    ids = jnp.asarray([[12, 13, 1, 1, 0, 0], [12, 13, 12, 1, 1, 1]])
    down = counted(m, get_scheme("sinusoidal"), ids, jnp.zeros_like(ids))
    assert down.tolist() == [[4, 3, 2, 1, 0, 0], [6, 5, 4, 3, 2, 1]]


def test_one_length_per_batch_gives_every_row_the_same_length():
    experiment = paper("reverse", **{"task.max_len": 40})
    for seed in range(3):
        rows = training_rows(experiment, jax.random.PRNGKey(seed), jax.random.PRNGKey(9))
        lengths = np.sum(np.asarray(rows.src) != PAD_ID, axis=1)
        assert len(set(lengths.tolist())) == 1
    default = resolve("reverse", overrides={"model.arch": "encoder", "task.max_len": 40})
    rows = training_rows(default, jax.random.PRNGKey(0), jax.random.PRNGKey(9))
    assert len(set(np.sum(np.asarray(rows.src) != PAD_ID, axis=1).tolist())) > 1


def test_the_examples_average_weighs_a_short_answer_as_much_as_a_long_one():
    logits = jnp.zeros((2, 4, 5)).at[0, :, 3].set(5.0)  # row 0 right, row 1 wrong
    targets = jnp.asarray([[3, 0, 0, 0], [4, 4, 4, 4]])
    by_tokens, _ = cross_entropy(logits, targets)
    by_examples, _ = cross_entropy(logits, targets, per_example=True)
    right, wrong = (cross_entropy(logits[i : i + 1], targets[i : i + 1])[0] for i in (0, 1))
    assert by_examples == pytest.approx((right + wrong) / 2)
    assert by_tokens == pytest.approx((right + 4 * wrong) / 5)


def test_the_defaults_keep_jabs_encoder_form():
    experiment = resolve("reverse", overrides={"model.arch": "encoder"})
    m, tr = experiment.config.model, experiment.config.train
    assert (m.embedding_init, m.answer_slots, m.count_positions) == (0.0, "eos", "up")
    assert (m.attention_bias, m.outputs) == (True, "vocabulary")
    assert (tr.lengths, tr.loss_average) == ("per_row", "tokens")


@pytest.mark.parametrize(
    "sets, expected",
    [
        (["model.outputs=classes"], "model.outputs is an option of the paper's Transformer"),
        (["model.attention_bias=false"], "model.arch=encoder_decoder does not take it"),
        (["model.arch=encoder", "model.answer_slots=none"], "model.answer_slots"),
        (
            ["model.arch=encoder", "model.count_positions=down", "model.pos_encoding=randomized"],
            "model.pos_encoding=randomized draws positions of its own",
        ),
        (["train.lengths=per_batch"], "train.lengths=per_batch trains one example per row"),
        (
            ["model.arch=encoder", "model.outputs=classes", "task.index_hints=true"],
            "model.outputs=classes writes no index hints",
        ),
    ],
)
def test_a_paper_option_where_it_cannot_apply_is_one_line_and_exit_2(sets, expected, tmp_path):
    args = [a for s in sets for a in ("--set", s)]
    result = jab_here(
        "train", "--task", "reverse", "--steps", "1", *args, cwd=tmp_path, check=False
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jab: error: ")
    assert expected in lines[0]
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


ALONE = {
    "model.embedding_init": 0.02,
    "model.answer_slots": "exact",
    "model.count_positions": "down",
    "model.attention_bias": False,
    "model.outputs": "classes",
    "train.lengths": "per_batch",
    "train.loss_average": "examples",
}


@pytest.mark.parametrize("key", ALONE)
def test_each_paper_option_alone_trains_and_answers_the_encoder_form(key):
    """Each difference can be measured alone: jab's own encoder form with that one key."""
    sets = {**SMALL, "model.arch": "encoder", "task.alphabet": "01", key: ALONE[key]}
    experiment = resolve("reverse", overrides=sets, steps=4)
    trainer = training.Trainer(experiment)
    trained = trainer.run()
    assert trained.step == 4 and trained.last_eval
    for example in trained.last_eval[0].scores["examples"]:
        assert len(example["output"]) <= len(example["input"]) + 1  # at most its slots
        if key == "model.outputs":
            assert set(example["output"]) <= {"0", "1"}
