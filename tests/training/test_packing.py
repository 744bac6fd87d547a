"""Packing two training examples into one row of the batch (jabcli/training/packing.py) makes
steps cheaper without changing what any example computes."""

import jax
import numpy as np
import pytest

from jabcli.experiment.resolve import resolve
from jabcli.tasks import derived, sampling
from jabcli.training import packing
from jabcli.training.packing import Rows
from jabcli.training.training import cross_entropy, init, rows_logits, training_rows

# One layer: the masks that keep two examples of a row apart are those of every layer.
SMALL = ["model.d_model=32", "model.d_ff=64", "model.num_heads=2", "model.num_layers=1",
         "train.batch_size=8"]  # fmt: skip


def forward(experiment, params, rows: Rows):
    """The logits a training step computes for `rows`, without dropout."""
    logits = jax.jit(lambda p, r: rows_logits(experiment, p, None, r, is_training=False))
    return np.asarray(logits(params, rows))


@pytest.mark.parametrize(
    "task, encoding, extra",
    [
        ("reverse", "alibi", []),
        ("duplicate", "randomized", []),  # answers twice as long; random positions
        ("addition", "coupled", []),  # lengths from 3; coupled positions
        ("sort", "rope", []),
        # a hint before every symbol; cross-attention scaled by the source's own length
        ("shift", "distance", ["task.index_hints=true"]),
        # decoder-only: one causal sequence, the input's padding in its middle
        ("reverse", "rope", ["model.arch=decoder"]),
        ("addition", "coupled", ["model.arch=decoder"]),
    ],
)
def test_an_example_packed_beside_another_gets_the_logits_it_gets_alone(task, encoding, extra):
    sets = [*SMALL, f"model.pos_encoding={encoding}", "model.max_positions=64", *extra]
    experiment = resolve(task, sets=sets)
    params = init(experiment, 0).params
    t = experiment.config.task

    def rows() -> tuple[Rows, Rows]:  # jitted as in a training step: one program, not 150
        lengths = packing.paired_lengths(jax.random.PRNGKey(1), 4, t.min_len, t.max_len)
        batch = sampling.sample_lengths(experiment.task, jax.random.PRNGKey(2), lengths, t.max_len)
        positions = experiment.positions(jax.random.PRNGKey(3), batch.src, batch.tgt_in.shape[1])
        alone = Rows(batch.src, batch.tgt_in, batch.tgt_out, *positions)
        widths = derived.packed_widths(experiment.task, t.min_len, t.max_len)
        return alone, packing.pack(alone, *widths)

    alone, packed = jax.jit(rows)()
    assert packed.src.shape[0] == 4 and alone.src.shape[0] == 8
    alone_logits, packed_logits = (
        forward(experiment, params, alone),
        forward(experiment, params, packed),
    )
    answers = np.asarray(alone.tgt_out != 0).sum(1)
    for row in range(4):
        first, second = answers[row], answers[4 + row]
        np.testing.assert_allclose(
            packed_logits[row, :first], alone_logits[row, :first], rtol=1e-4, atol=1e-4
        )
        np.testing.assert_allclose(
            packed_logits[row, first : first + second],
            alone_logits[4 + row, :second],
            rtol=1e-4,
            atol=1e-4,
        )
        assert not np.asarray(packed.tgt_out)[row, first + second :].any()  # then padding
    # The loss and accuracies of the step are those of the examples.
    scores = jax.jit(lambda *args: cross_entropy(*args)[1])
    for name, value in scores(packed_logits, packed.tgt_out, packed.tgt_segments).items():
        expected = scores(alone_logits, alone.tgt_out, None)[name]
        np.testing.assert_allclose(value, expected, rtol=1e-4, atol=1e-5, err_msg=name)


def test_packed_lengths_are_each_uniform_over_the_training_range():
    lengths = np.asarray(packing.paired_lengths(jax.random.PRNGKey(0), 20000, 1, 16))
    counts = np.bincount(lengths, minlength=17)[1:]
    assert counts.sum() == 40000 and counts.min() > 0.9 * 2500 and counts.max() < 1.1 * 2500


def test_a_training_step_packs_two_examples_per_row_only_for_generated_tasks():
    experiment = resolve("reverse", sets=SMALL)
    rows = training_rows(experiment, jax.random.PRNGKey(0), jax.random.PRNGKey(1))
    assert rows.src.shape == (4, 1 + 16 + 2) and set(np.unique(rows.src_segments)) <= {0, 1, 2}
    unpacked = resolve("reverse", sets=[*SMALL, "train.pack=false"])
    rows = training_rows(unpacked, jax.random.PRNGKey(0), jax.random.PRNGKey(1))
    assert rows.src.shape == (8, 17) and rows.src_segments is None
