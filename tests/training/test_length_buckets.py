"""Length buckets (jabcli/training/buckets.py): with one length per batch
(train.lengths=per_batch, the paper's), a training step runs its batch at the widths of its
length's bucket instead of task.max_len's. Padding is masked, so the step must train as
the padded one does; only how fast may change."""

import functools
import io
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jabrun import interrupt_after, jab_here

from jabcli.core import memory
from jabcli.core.tokenizer import PAD_ID
from jabcli.experiment.resolve import resolve
from jabcli.training import buckets, programs, step
from jabcli.training.schedule import Schedule

ROOT = Path(__file__).resolve().parents[2]
PRESET = ROOT / "configs" / "paper_transformer.yaml"
# The paper's model, small; no dropout, whose masks are drawn at the width a step runs at
SMALL = {"model.num_layers": 2, "model.d_model": 16, "model.d_ff": 32, "model.num_heads": 2}
SMALL |= {"train.batch_size": 8, "task.max_len": 20, "model.dropout": 0.0}
streams = (step.TRAIN_STREAM, step.POSITION_STREAM)


def paper(task: str, **sets):
    return resolve(task, PRESET, overrides={**SMALL, **sets}, steps=10)


def steps(experiment, count: int):
    """`count` training steps from seed 0, each step's loss and the trained parameters."""
    state = programs.init(experiment, 0)
    schedule = Schedule.of(experiment.config.train)
    update = jax.jit(lambda state: step.update(experiment, state, schedule))
    losses = []
    for _ in range(count):
        state, metrics = update(state)
        losses.append(float(metrics["loss"]))
    return losses, state.params


def test_the_paper_config_runs_each_batch_at_its_lengths_bucket():
    assert buckets.applies(paper("even_pairs"))
    assert buckets.bucket_lengths(1, 40) == [5, 10, 15, 20, 25, 30, 35, 40]
    assert buckets.bucket_lengths(1, 20) == [4, 8, 12, 16, 20]
    assert buckets.bucket_lengths(3, 5) == [5]  # too few lengths to cut
    # each example its own length, or several seeds in one program: every batch padded
    assert not buckets.applies(paper("even_pairs", **{"train.lengths": "per_row"}))
    assert not buckets.applies(paper("even_pairs", **{"train.seeds": 2}))


@pytest.mark.parametrize(
    "task, sets",
    [
        ("even_pairs", {}),
        ("reverse", {"task.alphabet": "01"}),
        ("bucket_sort", {}),
        # jab's own slots and outputs, positions drawn for the whole padded sequence
        ("reverse", {"model.answer_slots": "eos", "model.outputs": "vocabulary"}),
        ("duplicate", {"model.count_positions": "up", "model.pos_encoding": "randomized"}),
    ],
)
def test_a_bucketed_step_trains_as_the_padded_step_does(task, sets, monkeypatch):
    experiment = paper(task, **sets)
    assert buckets.applies(experiment)
    bucketed, bucketed_params = steps(experiment, 6)
    # some of the steps ran narrower than task.max_len (their longest source, <eos> too)
    state = programs.init(experiment, 0)
    keys = ((step.step_key(state.rng, s, i) for s in streams) for i in range(6))
    drawn = [step.training_rows(experiment, *k).src != PAD_ID for k in keys]
    assert min(int(np.max(np.sum(tokens, axis=1))) for tokens in drawn) <= 16
    monkeypatch.setattr(buckets, "BUCKETS", 1)  # one bucket: every batch at task.max_len
    assert not buckets.applies(experiment)
    padded, padded_params = steps(experiment, 6)
    np.testing.assert_allclose(bucketed, padded, rtol=1e-5)
    trained = zip(*map(jax.tree_util.tree_leaves, (bucketed_params, padded_params)))
    for a, b in trained:
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def chunk_bytes(experiment) -> int:
    """What the experiment's training chunk needs at its peak, as the memory check reads it."""
    state = programs.state_shapes(experiment)
    schedule = Schedule.of(experiment.config.train)
    schedule = jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), schedule)
    chunk = jax.jit(functools.partial(step.train_chunk, experiment))
    lowered = chunk.lower(state, jax.ShapeDtypeStruct((), jnp.int32), schedule)
    return memory.program_bytes(lowered.compile())


def test_a_config_too_large_at_task_max_len_is_still_refused(monkeypatch):
    """The memory check reads the compiled chunk's peak: with buckets, its widest branch,
    the whole padded batch, as without them."""
    experiment = paper("reverse", **{"task.alphabet": "01", "train.batch_size": 64})
    bucketed = chunk_bytes(experiment)
    monkeypatch.setattr(buckets, "BUCKETS", 1)
    assert bucketed >= 0.99 * chunk_bytes(experiment)


def checkpoint(run: Path) -> dict:
    """The arrays of the run's newest checkpoint, and its step."""
    newest = sorted((run / "checkpoints").glob("step-*.npz"))[-1]
    with np.load(io.BytesIO(newest.read_bytes()), allow_pickle=False) as npz:
        return {"step": newest.name, **{k: npz[k] for k in npz.files}}


def test_a_bucketed_run_stopped_and_resumed_ends_bitwise_equal_to_an_unstopped_one(tmp_path):
    """With dropout on, as the paper has it: every step's masks are drawn from its step."""
    sets = {**SMALL, "model.dropout": 0.1, "train.log_every": 25, "train.eval_every": 1000}
    train = ["train", "--task", "even_pairs", "--config", str(PRESET), "--steps", "300"]
    train += [arg for key, value in sets.items() for arg in ("--set", f"{key}={value}")]
    jab_here(*train, "--out", "whole", cwd=tmp_path)
    code, _, err = interrupt_after([*train, "--out", "cut"], tmp_path, Path("cut"), 3)
    assert code == 130, err
    assert checkpoint(tmp_path / "cut")["step"] < checkpoint(tmp_path / "whole")["step"]
    jab_here("train", "--resume", "cut", cwd=tmp_path)
    whole, cut = checkpoint(tmp_path / "whole"), checkpoint(tmp_path / "cut")
    assert whole.keys() == cut.keys()
    for name in whole:
        np.testing.assert_array_equal(whole[name], cut[name], err_msg=name)
