"""The paper's recurrent baselines (model.arch=lstm, stack_rnn, tape_rnn; recurrent.py):
their stack and tape move as the paper's code moves them, they train and learn, resume
bit-equal, and every command that works on a run works on one."""

import io
import json
import os
import re
import signal

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jabrun import jab_here, overrides

from jabcli.core.errors import JabError
from jabcli.core.tokenizer import PAD_ID
from jabcli.experiment.resolve import resolve
from jabcli.model.recurrent import (
    JUMP_LEFT,
    JUMP_RIGHT,
    LEFT,
    NO_OP,
    POP,
    PUSH,
    RIGHT,
    STAY,
    update_stack,
    update_tape,
)

FORMS = ("lstm", "stack_rnn", "tape_rnn")
SMALL = ["model.d_model=16", "task.max_len=5", "task.alphabet=0123", "train.batch_size=32",
         "train.learning_rate=0.01", "train.warmup_steps=10",
         "train.target_seq_acc=1.0"]  # fmt: skip
SMALL_SETS = [arg for value in SMALL for arg in ("--set", value)]


def cells(*values) -> jax.Array:
    """One row's memory [1, M, 1] of cells holding `values`, cell 0 first."""
    return jnp.asarray(values, jnp.float32)[None, :, None]


def chosen(action: int, count: int) -> jax.Array:
    """[1, count] probabilities, all of them on `action`."""
    return jax.nn.one_hot(jnp.asarray([action]), count)


def test_push_pop_and_no_op_move_the_stack_as_the_papers_stack_rnn_does():
    stack, value = cells(1, 2, 3), jnp.asarray([[9.0]])

    def after(actions):
        return np.asarray(update_stack(stack, actions, value))[0, :, 0].tolist()

    assert after(chosen(PUSH, 3)) == [9, 1, 2]  # the bottom cell falls off
    assert after(chosen(POP, 3)) == [2, 3, 0]  # an empty cell comes in at the bottom
    assert after(chosen(NO_OP, 3)) == [1, 2, 3]
    # Unsure actions mix the three stacks by their probabilities.
    mixed = jnp.asarray([[0.5, 0.25, 0.25]])
    np.testing.assert_allclose(after(mixed), [5.25, 1.75, 1.75])


def test_the_tapes_jumps_pass_back_the_gradient_of_a_plain_roll():
    """`roll_rows` has its own gradient (the opposite roll, faster than JAX's scatter):
    it must be the one jnp.roll of each row would give."""
    import jax
    import jax.numpy as jnp

    from jabcli.model.recurrent import roll_rows

    cells = jax.random.normal(jax.random.PRNGKey(0), (3, 7, 2))
    shift = jnp.array([0, 3, -9])
    weights = jax.random.normal(jax.random.PRNGKey(1), (3, 7, 2))

    def plain(cells):
        rolled = jnp.stack([jnp.roll(row, int(s), axis=0) for row, s in zip(cells, shift)])
        return jnp.sum(weights * rolled**2)

    ours = jax.grad(lambda cells: jnp.sum(weights * roll_rows(cells, shift) ** 2))(cells)
    np.testing.assert_allclose(ours, jax.grad(plain)(cells), rtol=1e-6)
    # On rings of each row's first cells (model.memory_grows), the same of those cells.
    ring = [7, 4, 5]

    def plain_rings(cells):
        rolled = jnp.stack([
            jnp.concatenate([jnp.roll(row[:n], int(s), axis=0), row[n:]])
            for row, s, n in zip(cells, shift, ring)
        ])  # fmt: skip
        return jnp.sum(weights * rolled**2)

    def rings(cells):
        return jnp.sum(weights * roll_rows(cells, shift, jnp.asarray(ring)) ** 2)

    np.testing.assert_allclose(rings(cells), plain_rings(cells), rtol=1e-6)
    np.testing.assert_allclose(jax.grad(rings)(cells), jax.grad(plain_rings)(cells), rtol=1e-6)


def test_the_tape_is_written_under_its_head_then_stays_moves_or_jumps_the_inputs_length():
    tape, value = cells(1, 2, 3, 4, 5), jnp.asarray([[9.0]])

    def after(action, jump=2):
        moved = update_tape(tape, chosen(action, 5), value, jnp.asarray([jump]))
        return np.asarray(moved)[0, :, 0].tolist()

    # The head is cell 0; as in the paper's code, `left` rolls the tape by -1, so that
    # the head then reads what was cell 1, and the tape is a ring.
    assert after(STAY) == [9, 2, 3, 4, 5]
    assert after(LEFT) == [2, 3, 4, 5, 9]
    assert after(RIGHT) == [5, 9, 2, 3, 4]
    assert after(JUMP_LEFT) == [3, 4, 5, 9, 2]
    assert after(JUMP_RIGHT) == [4, 5, 9, 2, 3]
    assert after(JUMP_RIGHT, jump=3) == [3, 4, 5, 9, 2]
    # Each row jumps its own input's length.
    rows = update_tape(
        jnp.concatenate([tape, tape]),
        jnp.concatenate([chosen(JUMP_LEFT, 5)] * 2),
        jnp.asarray([[9.0], [9.0]]),
        jnp.asarray([1, 3]),
    )
    assert np.asarray(rows)[:, :, 0].tolist() == [[2, 3, 4, 5, 9], [4, 5, 9, 2, 3]]


def test_a_growing_tape_is_a_ring_of_each_rows_own_tokens_and_the_rest_never_moves():
    """With model.memory_grows each row's tape is a ring of as many cells as its sequence
    has tokens; the cells past them (a longer row's) stay as they are."""
    tape, value = jnp.concatenate([cells(1, 2, 3, 4, 5, 6)] * 2), jnp.asarray([[9.0], [9.0]])
    ring = jnp.asarray([4, 6])

    def after(action, jump=(1, 1)):
        actions = jnp.concatenate([chosen(action, 5)] * 2)
        moved = update_tape(tape, actions, value, jnp.asarray(jump), ring)
        return np.asarray(moved)[:, :, 0].tolist()

    assert after(STAY) == [[9, 2, 3, 4, 5, 6], [9, 2, 3, 4, 5, 6]]
    assert after(LEFT) == [[2, 3, 4, 9, 5, 6], [2, 3, 4, 5, 6, 9]]
    assert after(RIGHT) == [[4, 9, 2, 3, 5, 6], [6, 9, 2, 3, 4, 5]]
    assert after(JUMP_LEFT, jump=(2, 3)) == [[3, 4, 9, 2, 5, 6], [4, 5, 6, 9, 2, 3]]
    assert after(JUMP_RIGHT, jump=(3, 2)) == [[2, 3, 4, 9, 5, 6], [5, 6, 9, 2, 3, 4]]


@pytest.mark.parametrize("arch", FORMS)
def test_each_recurrent_form_trains_and_its_loss_falls(arch):
    from jabcli.training.training import Trainer

    experiment = resolve("reverse", sets=[f"model.arch={arch}", *SMALL, "train.log_every=20"])
    assert experiment.one_pass and not experiment.packs  # train.pack is on by default
    trainer = Trainer(experiment)
    state, losses = trainer.state, []
    for _ in range(4):
        state, metrics = trainer.chunk(state, jnp.asarray(20, jnp.int32))
        losses.append(float(np.asarray(metrics["loss"]).ravel()[0]))
    assert np.isfinite(losses).all() and losses[-1] < 0.8 * losses[0], losses


@pytest.mark.parametrize("arch", [*FORMS, "stack_rnn grows", "tape_rnn grows"])
def test_a_recurrent_forms_answer_depends_on_its_input_never_on_padding_or_the_answer(arch):
    from jabcli.training.training import init

    arch, _, grows = arch.partition(" ")
    sets = [f"model.arch={arch}", *SMALL, *(["model.memory_grows=true"] if grows else [])]
    experiment = resolve("reverse", sets=sets)
    params = init(experiment, 0).params
    batch = experiment.sample(jax.random.PRNGKey(1), 8)
    forward = jax.jit(experiment.model.forward)
    logits, trace = forward(params, None, batch.src, batch.tgt_in)
    assert logits.shape == (*batch.tgt_out.shape, len(experiment.tokenizer))
    scrambled = jax.random.randint(jax.random.PRNGKey(2), batch.tgt_in.shape, 3, 10)
    np.testing.assert_array_equal(forward(params, None, batch.src, scrambled)[0], logits)
    wider = jnp.pad(batch.src, ((0, 0), (0, 3)))
    more_slots = jnp.pad(batch.tgt_in, ((0, 0), (0, 2)))
    padded, _ = forward(params, None, wider, more_slots)
    answers = np.asarray(batch.tgt_out != PAD_ID)
    width = batch.tgt_in.shape[1]
    np.testing.assert_allclose(padded[:, :width][answers], logits[answers], atol=1e-5)
    steps = batch.src.shape[1] + width
    if arch == "lstm":
        assert trace.cells is None
    else:  # the memory after every step: 30 cells of 8 for the stack, 40 for the tape,
        # or a cell a step of the sequence
        memory = steps if grows else 30 if arch == "stack_rnn" else 40
        assert trace.cells.shape == (8, steps, memory, 8)
        # A row's answer is the one it gets alone, however long the rows beside it.
        alone, _ = forward(params, None, batch.src[:1], batch.tgt_in[:1])
        np.testing.assert_allclose(alone[0][answers[0]], logits[0][answers[0]], atol=1e-5)
    # Inputs that differ give answers that differ.
    other = jnp.where(batch.src > PAD_ID + 2, 3 + (batch.src - 2) % 4, batch.src)
    assert not np.allclose(forward(params, None, other, batch.tgt_in)[0], logits)


def test_an_lstm_learns_parity_on_short_inputs_in_a_few_hundred_steps(tmp_path):
    from jabcli.api import api

    # Chance is one answer in two; seeds 0-3 all end at 92% or more.
    sets = {"model.arch": "lstm", "model.d_model": 64, "task.max_len": 6,
            "train.batch_size": 64, "train.learning_rate": 0.02, "train.warmup_steps": 20,
            "train.eval_every": 100, "train.target_seq_acc": 0.99}  # fmt: skip
    run = api.train("parity_check", steps=600, overrides=sets, out=tmp_path / "run")
    result = run.evaluate((1, 6), samples=200)
    assert result["seq_acc"] >= 0.9, result


def stop_after(chunks: int):
    """A training observer that sends this process SIGINT after `chunks` logged chunks,
    as a Ctrl-C does: training stops between two chunks and saves its step."""
    from jabcli.training.session import Observer

    class Stopper(Observer):
        logged = 0

        def log(self, records):
            self.logged += 1
            if self.logged == chunks:
                os.kill(os.getpid(), signal.SIGINT)

    return Stopper()


def test_a_tape_rnn_run_stopped_and_resumed_ends_bit_equal_to_one_trained_straight(tmp_path):
    from jabcli.api import api
    from jabcli.training import session

    sets = overrides(SMALL)
    sets |= {"model.arch": "tape_rnn", "train.log_every": 10, "train.eval_every": 20}
    api.train("reverse", steps=60, overrides=sets, out=tmp_path / "whole")
    with pytest.raises(KeyboardInterrupt, match="interrupted at step 30"):
        api.train("reverse", steps=60, overrides=sets, out=tmp_path / "cut", view=stop_after(3))
    session.resume(tmp_path / "cut", None)

    def saved(run):
        data = (tmp_path / run / "checkpoints/step-00000060.npz").read_bytes()
        with np.load(io.BytesIO(data)) as npz:
            return {name: npz[name] for name in npz.files}

    whole, cut = saved("whole"), saved("cut")
    assert whole.keys() == cut.keys()
    for name in whole:
        np.testing.assert_array_equal(whole[name], cut[name], err_msg=name)


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["model.arch=lstm", "model.pos_encoding=rope"],
         "model.arch=lstm reads no positions: leave model.pos_encoding unset (got 'rope')"),
        (["model.arch=stack_rnn", "model.src_pos_encoding=learned"],
         "model.arch=stack_rnn reads no positions: leave model.src_pos_encoding unset"),
        (["model.arch=tape_rnn", "model.tgt_pos_encoding=none"],
         "model.arch=tape_rnn reads no positions: leave model.tgt_pos_encoding unset"),
        (["model.arch=lstm", "model.memory_size=20"],
         "model.memory_size sizes the memory of model.arch=stack_rnn or tape_rnn; "
         "model.arch=lstm has none (got 20)"),
        (["model.memory_cell_size=4"],
         "model.memory_cell_size sizes the memory of model.arch=stack_rnn or tape_rnn; "
         "model.arch=encoder_decoder has none (got 4)"),
        (["model.arch=stack_rnn", "model.memory_size=1"],
         "model.memory_size must be 0 (the paper's 30 cells) or at least 2 for stack_rnn, got 1"),
        (["model.arch=tape_rnn", "model.memory_cell_size=0"],
         "model.memory_cell_size must be positive, got 0"),
        (["model.arch=tape_rnn", "model.memory_size=-1"],
         "model.memory_size must be zero or more, got -1"),
        (["model.arch=lstm", "model.memory_grows=true"],
         "model.memory_grows sizes the memory of model.arch=stack_rnn or tape_rnn; "
         "model.arch=lstm has none (got True)"),
        (["model.arch=tape_rnn", "model.memory_grows=true", "model.memory_size=512"],
         "model.memory_grows gives tape_rnn a cell per step of what it reads: leave "
         "model.memory_size at 0 (got 512)"),
        (["model.arch=rnn"],
         "model.arch must be one of encoder_decoder, encoder, decoder, lstm, stack_rnn, tape_rnn"),
    ],
)  # fmt: skip
def test_options_a_recurrent_form_cannot_use_are_refused_in_one_line(sets, message):
    with pytest.raises(JabError, match=re.escape(message)) as refused:
        resolve("copy", sets=sets)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("arch", ["lstm", "stack_rnn", "tape_rnn"])
def test_a_recurrent_form_ignores_the_transformers_number_of_heads(arch):
    experiment = resolve("copy", sets=[f"model.arch={arch}", "model.num_heads=3"])
    assert experiment.config.model.d_model % 3  # heads that would not divide a Transformer's


def test_a_recurrent_run_records_that_it_reads_no_positions_and_takes_its_memory_size():
    experiment = resolve("duplicate", sets=["model.arch=tape_rnn", "model.max_positions=16",
                                            "model.pos_encoding=sinusoidal"])  # fmt: skip
    assert experiment.config.model.pos_encoding == "none"  # the default, never read
    experiment.check_length(500, "length 500")  # no position limits its inputs
    bigger = resolve("copy", sets=["model.arch=stack_rnn", "model.memory_size=12",
                                   "model.memory_cell_size=3", "task.max_len=4"])  # fmt: skip
    from jabcli.training.training import init

    params = init(bigger, 0).params
    src = bigger.sample(jax.random.PRNGKey(0), 2).src
    _, trace = bigger.model.forward(params, None, src, jnp.zeros((2, 5), jnp.int32))
    assert trace.cells.shape[2:] == (12, 3)


def test_what_decoding_a_recurrent_run_holds_is_counted_a_little_above_what_it_compiles_to():
    """`jab eval` sizes its chunks, and refuses lengths, by `Form.decode_bytes`."""
    from jabcli.core import memory
    from jabcli.evaluation import decode
    from jabcli.training.training import init

    for arch in FORMS:
        experiment = resolve("duplicate", sets=[f"model.arch={arch}", "model.d_model=64"])
        params = init(experiment, 0).params
        rows, source, answer = 8, 101, 202
        src = jnp.full((rows, source), 3, jnp.int32).at[:, -1].set(2)
        positions = experiment.positions(jax.random.PRNGKey(0), src, answer)
        program = decode.one_pass_decode.lower(
            experiment.model, params, src, answer, *positions
        ).compile()
        compiled = memory.program_bytes(program) / rows
        counted = decode.decode_bytes(experiment, source, answer)
        assert compiled <= counted <= 2 * compiled, (arch, compiled, counted)


def test_an_lstm_run_trains_resumes_evaluates_predicts_and_compares_in_seeds(tmp_path, monkeypatch):
    """Every command that works on a run works on a recurrent one; show-attention, which
    has no attention or memory to draw for an LSTM, says so in one line."""
    form = ["--set", "model.arch=lstm", "--seeds", "2"]
    args = ["--task", "copy", *SMALL_SETS, *form]
    trained = jab_here("train", *args, "--steps", "40", "--out", "runs/l", cwd=tmp_path).stdout
    assert "Training 2 seeds of copy (lengths 1-5, LSTM) into runs/l" in trained
    assert "show-attention" not in trained  # not suggested: there is nothing to draw
    jab_here("resume", "runs/l", "--steps", "60", cwd=tmp_path)
    listed = json.loads(jab_here("runs", "runs", "--json", cwd=tmp_path).stdout)
    assert listed[0]["arch"] == "lstm" and listed[0]["pos_encoding"] == "none"
    listed = jab_here("runs", "runs", cwd=tmp_path).stdout
    assert "LSTM, " in listed and "none" not in listed  # its form, not positions it lacks
    evaluated = ["--lengths", "3-9", "--samples", "10", "--force-length", "--json"]
    result = json.loads(jab_here("eval", "--run", "runs/l", *evaluated, cwd=tmp_path).stdout)
    assert result["step"] == 60 and sorted(map(int, result["per_length"])) == list(range(3, 10))
    assert result["arch"] == "lstm"
    shown = jab_here("eval", "--run", "runs/l", "--samples", "5", cwd=tmp_path).stdout
    assert "copy, LSTM" in shown and "positions" not in shown
    for row in result["per_length"].values():
        assert 0.0 <= row["seq_acc"] <= row["forced_seq_acc"] <= 1.0
    predicted = jab_here("predict", "0123", "321", "--run", "runs/l/seed-0", cwd=tmp_path)
    assert re.search(r"0123\s+\S*\s+0123\s+[✓✗]", predicted.stdout)
    compared = jab_here("compare", "runs/l", "runs/l", "--lengths", "4-5", "--samples", "5",
                        cwd=tmp_path)  # fmt: skip
    assert compared.stderr == "" and "copy, LSTM, 1-5" in compared.stdout
    refused = jab_here("show-attention", "--run", "runs/l/seed-0", cwd=tmp_path, check=False)
    assert refused.returncode != 0 and refused.stdout == ""
    assert refused.stderr.strip() == (
        "jab: error: a model.arch=lstm run has no attention or memory that jab can draw"
    )
    # Any length, as far as memory goes: one that would not fit is refused in one line.
    from jabcli.core import memory

    monkeypatch.setattr(memory, "available_bytes", lambda: 2**20)
    too_long = ["--lengths", "3000-3000", "--samples", "1"]
    refused = jab_here("eval", "--run", "runs/l", *too_long, cwd=tmp_path, check=False)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert refused.stderr.startswith("jab: error: decoding an input of 3000 symbols needs about")


@pytest.mark.parametrize("arch", ["stack_rnn", "tape_rnn"])
def test_show_attention_draws_a_stack_or_tape_cell_by_cell_after_each_token_it_reads(
    arch, tmp_path
):
    from jabcli.api import api

    kind = arch.removesuffix("_rnn")
    args = ["--task", "reverse", *SMALL_SETS, "--set", f"model.arch={arch}"]
    trained = jab_here("train", *args, "--steps", "20", "--out", "runs/m", cwd=tmp_path).stdout
    assert "jab show-attention --run runs/m" in trained  # suggested: there is a picture
    drawn = jab_here("show-attention", "--run", "runs/m", "--input", "0123", cwd=tmp_path).stdout
    assert drawn.startswith(f"{kind} of runs/m: input 0123 -> output ")
    assert "each cell's size after each step" in drawn
    assert f"columns: the {kind}'s cells, 0 " in drawn
    assert re.search(r"^│\s+□→\S", drawn, re.M)  # an answer slot's row, with what it wrote
    picture = api.Run(tmp_path / "runs/m").attention("0123")
    sizes = picture.weights[0]  # one head: [steps, cells]
    assert picture.kind == kind and picture.layer == 0
    assert picture.rows[:5] == ["0", "1", "2", "3", "<eos>"] and len(picture.rows) == len(sizes)
    assert sizes.max() == 1.0 and sizes.min() >= 0.0
    if arch == "stack_rnn":  # a push a step at most: after k tokens, only k cells hold any
        assert all(not sizes[k, k + 1 :].any() for k in range(len(sizes)))
        assert len(picture.cols) <= len(sizes)  # the cells no step reached, left out
    else:  # a ring of the paper's 40 cells, every one of them within reach of a jump
        assert picture.cols == [str(cell) for cell in range(40)]
        # Its columns numbered tens over ones, not run together ("1011121314").
        assert "1011" not in drawn and "0 1 2 3 4 5 6 7 8 9 0 1 2 3" in drawn
        assert " ".join(["1"] * 10 + ["2"] * 10 + ["3"] * 10) in drawn
    assert f"{kind} after each step" in picture._repr_html_()
    for wrong, message in [
        (["--kind", "cross"], f"a model.arch={arch} run has no cross attention: it has {kind}"),
        (["--layer", "1"], "layer must be between 0 and 0 (or -1 for the last), got 1"),
    ]:
        refused = jab_here("show-attention", "--run", "runs/m", *wrong, cwd=tmp_path, check=False)
        assert refused.returncode != 0 and refused.stderr.startswith(f"jab: error: {message}")


def test_a_study_grids_model_arch_over_the_recurrent_forms_and_measures_each(tmp_path):
    """A cell with `model.arch: lstm` is an ordinary run; a cell asking a recurrent form
    for an encoding is refused before anything trains."""
    base = """
name: forms
base:
  task: parity_check
  steps: 40
  set: {task.max_len: 4, model.d_model: 16, train.batch_size: 16, train.eval_every: 20,
        train.log_every: 20}
evaluate: {lengths: 1-6, samples: 5}
"""
    study = tmp_path / "forms.yaml"
    study.write_text(base + "parameters:\n  model.arch: {values: [lstm, stack_rnn]}\n")
    jab_here("study", "run", study, cwd=tmp_path)
    shown = json.loads(jab_here("study", "show", "runs/forms", "--json", cwd=tmp_path).stdout)
    assert [c["state"] for c in shown["cells"]] == ["measured", "measured"]
    config = (tmp_path / "runs/forms/lstm/config.yaml").read_text()
    assert "arch: lstm" in config and "pos_encoding: none" in config
    study.write_text(base + "rows:\n  - {name: rope, set: {model.arch: lstm, "
                     "model.pos_encoding: rope}}\n")  # fmt: skip
    refused = jab_here("study", "run", study, "--out", "runs/bad", cwd=tmp_path, check=False)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "model.arch=lstm reads no positions" in refused.stderr
    assert not (tmp_path / "runs/bad").exists()
