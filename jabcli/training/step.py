"""One training step as pure functions of one state value: the rows a step trains on,
drawn on the device from (seed, step) (`training_rows`), the loss (`cross_entropy`),
`update` and `train_chunk`, which runs `log_every` steps inside one `lax.scan`.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.sharding import NamedSharding

from jabcli.core.tokenizer import PAD_ID
from jabcli.experiment.experiment import Experiment
from jabcli.tasks import derived, host_answers, sampling
from jabcli.training import buckets, packing
from jabcli.training.packing import Rows
from jabcli.training.schedule import Schedule, make_optimizer

# Independent random streams folded from a run's root key: one per use, never shared.
TRAIN_STREAM, DROPOUT_STREAM, EVAL_STREAM, POSITION_STREAM = 0, 1, 2, 3


class TrainingState(NamedTuple):
    params: Any
    opt_state: Any
    rng: jax.Array  # the run's root key; batch and dropout keys are folded from it by step
    step: jax.Array


def step_key(rng: jax.Array, stream: int, step) -> jax.Array:
    return jax.random.fold_in(jax.random.fold_in(rng, stream), step)


def cross_entropy(
    logits: jax.Array,
    targets: jax.Array,
    segments: jax.Array | None = None,
    scored: jax.Array | None = None,
    per_example: bool = False,
) -> tuple[jax.Array, dict]:
    """Mean token cross-entropy ignoring <pad> (and the tokens `scored` [R, T] leaves
    out), plus token and whole-answer accuracy (of each example, when `segments` says
    which of a packed row's tokens are whose). `per_example` (train.loss_average,
    unpacked rows): each row's mean, then the mean over rows, as the paper's code
    averages; else every token of the batch weighs the same."""
    real = targets != PAD_ID
    counted = real if scored is None else real & scored
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, targets)
    if per_example:
        tokens = jnp.sum(counted, axis=1)
        row_loss = jnp.sum(losses * counted, axis=1) / jnp.maximum(tokens, 1)
        loss = jnp.sum(row_loss) / jnp.maximum(jnp.sum(tokens > 0), 1)
    else:
        loss = jnp.sum(losses * counted) / jnp.maximum(jnp.sum(counted), 1)
    correct = (jnp.argmax(logits, -1) == targets) | ~real
    token_acc = jnp.sum(correct & counted) / jnp.maximum(jnp.sum(counted), 1)
    if segments is None:
        seq_acc = jnp.mean(jnp.all(correct, axis=1))
    else:  # a packed row holds two answers
        seq_acc = jnp.mean(jnp.stack([jnp.all(correct | (segments != s), axis=1) for s in (1, 2)]))
    return loss, {"loss": loss, "token_acc": token_acc, "seq_acc": seq_acc}


def init_state(experiment: Experiment, seed: jax.Array) -> TrainingState:
    """Fresh parameters and optimizer state for `seed` (traced; see `init`)."""
    rng = jax.random.PRNGKey(seed)
    batch = experiment.sample(rng, 2)
    params = experiment.model.init(jax.random.fold_in(rng, 99), batch.src, batch.tgt_in)
    tr = experiment.config.train
    optimizer = make_optimizer(tr, Schedule.of(tr))  # its state holds no schedule number
    return TrainingState(params, optimizer.init(params), rng, jnp.asarray(0, jnp.int32))


def training_rows(experiment: Experiment, sample_key: jax.Array, positions_key: jax.Array) -> Rows:
    """The batch one step trains on, with the positions the model gives it: two examples
    per row when the experiment packs (packing.py), else one."""
    tr, t = experiment.config.train, experiment.config.task
    if experiment.packs:
        length_key, symbol_key = jax.random.split(sample_key)
        lengths = packing.paired_lengths(length_key, tr.batch_size // 2, t.min_len, t.max_len)
        batch = sampling.sample_lengths(experiment.task, symbol_key, lengths, t.max_len)
    elif tr.lengths == "per_batch":  # the paper's: one length for every row
        length_key, symbol_key = jax.random.split(sample_key)
        length = jax.random.randint(length_key, (), t.min_len, t.max_len + 1)
        lengths = jnp.full((tr.batch_size,), length)
        batch = sampling.sample_lengths(experiment.task, symbol_key, lengths, t.max_len)
    else:
        batch = experiment.sample(sample_key, tr.batch_size)
    positions = experiment.positions(positions_key, batch.src, batch.tgt_in.shape[1])
    rows = Rows(batch.src, batch.tgt_in, batch.tgt_out, *positions)
    if experiment.packs:
        rows = packing.pack(rows, *derived.packed_widths(experiment.task, t.min_len, t.max_len))
    return rows


def rows_logits(
    experiment: Experiment, params, key: jax.Array | None, rows: Rows, is_training: bool
) -> jax.Array:
    """Teacher-forced logits [R, T, vocab] of the rows one step trains on (packed or not);
    `key` drives dropout when `is_training`."""
    logits, _ = experiment.model.forward(
        params,
        key,
        rows.src,
        rows.tgt_in,
        is_training=is_training,
        src_positions=rows.src_positions,
        tgt_positions=rows.tgt_positions,
        src_segments=rows.src_segments,
        tgt_segments=rows.tgt_segments,
    )
    return logits


def loss_fn(experiment: Experiment, params, key: jax.Array, rows: Rows):
    logits = rows_logits(experiment, params, key, rows, is_training=True)
    per_example = experiment.config.train.loss_average == "examples"
    scored = None
    if experiment.config.model.answer_slots == "exact":  # the slots past the answer's say <eos>
        slots = derived.exact_slots(experiment.task, rows.src)
        scored = jnp.arange(rows.tgt_out.shape[1])[None, :] < slots[:, None]
    return cross_entropy(logits, rows.tgt_out, rows.tgt_segments, scored, per_example)


def update(
    experiment: Experiment,
    state: TrainingState,
    schedule: Schedule,
    batch_sharding: NamedSharding | None = None,
) -> tuple[TrainingState, dict]:
    """One optimizer step on a batch drawn from (rng, step)."""
    tr = experiment.config.train
    rows = training_rows(
        experiment,
        step_key(state.rng, TRAIN_STREAM, state.step),
        step_key(state.rng, POSITION_STREAM, state.step),
    )
    if batch_sharding is not None:
        rows = jax.lax.with_sharding_constraint(rows, batch_sharding)
    dropout_key = step_key(state.rng, DROPOUT_STREAM, state.step)

    def gradients(rows: Rows) -> tuple[Any, dict]:
        loss = functools.partial(loss_fn, experiment)
        return jax.grad(loss, has_aux=True)(state.params, dropout_key, rows)

    if buckets.applies(experiment):  # the batch at its length's width, not task.max_len's
        grads, metrics = buckets.bucketed(experiment, gradients, rows)
    else:
        grads, metrics = gradients(rows)
    optimizer = make_optimizer(tr, schedule)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics["grad_norm"] = optax.tree.norm(grads)
    if host_answers.answered_on_host(experiment.task):  # solve's answers for the next step
        sample_key, positions_key = (
            step_key(state.rng, stream, state.step + 1)
            for stream in (TRAIN_STREAM, POSITION_STREAM)
        )
        metrics["grad_norm"] += host_answers.begin_next(
            lambda: training_rows(experiment, sample_key, positions_key)
        )
    return TrainingState(params, opt_state, state.rng, state.step + 1), metrics


def train_chunk(
    experiment: Experiment,
    state: TrainingState,
    num_steps: jax.Array,
    schedule: Schedule,
    batch_sharding: NamedSharding | None = None,
) -> tuple[TrainingState, dict]:
    """Up to `log_every` steps in one dispatch; steps past `num_steps` are skipped.
    Returns the state and the mean metrics of the steps taken."""
    log_every = experiment.config.train.log_every

    def step(state):
        return update(experiment, state, schedule, batch_sharding)

    def skip(state):
        zero = jnp.asarray(0.0)
        return state, {"loss": zero, "token_acc": zero, "seq_acc": zero, "grad_norm": zero}

    def body(state, i):
        return jax.lax.cond(i < num_steps, step, skip, state)

    state, metrics = jax.lax.scan(body, state, jnp.arange(log_every))
    valid = jnp.arange(log_every) < num_steps
    mean = {k: jnp.sum(jnp.where(valid, v, 0)) / num_steps for k, v in metrics.items()}
    finite = jnp.isfinite(metrics["loss"]) & jnp.isfinite(metrics["grad_norm"])
    mean["finite"] = jnp.all(finite | ~valid)
    return state, mean
