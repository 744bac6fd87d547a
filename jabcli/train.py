"""Training as pure functions around one state value.

`init(...) -> TrainingState` and `train_chunk(state) -> (state, metrics)` are jitted;
a chunk runs `log_every` steps inside one `lax.scan`, drawing each batch on the device
from (seed, step), so a run compiles once and the host is only asked for numbers
once per chunk. `Trainer.run` is the Python loop: it feeds chunks, evaluates, saves
and reports through callbacks; it never prints.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jabcli.config import Config
from jabcli.decode import greedy_decode
from jabcli.errors import JabError
from jabcli.model import ModelFns, build
from jabcli.tasks import Batch, Task, make_task
from jabcli.tokenizer import EOS_ID, PAD_ID, Tokenizer

TRAIN_STREAM, DROPOUT_STREAM, EVAL_STREAM, POSITION_STREAM = 0, 1, 2, 3
DECODE_CHUNK = 1024  # held-out sources decoded per call


class TrainingState(NamedTuple):
    params: Any
    opt_state: Any
    rng: jax.Array  # the run's root key; batch and dropout keys are folded from it by step
    step: jax.Array


def make_optimizer(cfg: Config) -> optax.GradientTransformation:
    """AdamW with linear warmup then cosine decay, after global-norm clipping."""
    tr = cfg.train
    schedule = learning_rate_schedule(cfg)
    return optax.chain(
        optax.clip_by_global_norm(tr.clip_norm) if tr.clip_norm > 0 else optax.identity(),
        optax.adamw(schedule, b1=0.9, b2=0.98, weight_decay=tr.weight_decay),
    )


def learning_rate_schedule(cfg: Config) -> optax.Schedule:
    tr = cfg.train
    return optax.warmup_cosine_decay_schedule(
        init_value=0.0,
        peak_value=tr.learning_rate,
        warmup_steps=min(tr.warmup_steps, tr.steps),
        decay_steps=max(tr.steps, tr.warmup_steps + 1),
        end_value=tr.learning_rate * 0.1,
    )


def step_key(rng: jax.Array, stream: int, step) -> jax.Array:
    return jax.random.fold_in(jax.random.fold_in(rng, stream), step)


def cross_entropy(logits: jax.Array, targets: jax.Array) -> tuple[jax.Array, dict]:
    """Mean token cross-entropy ignoring <pad>, plus token and whole-sequence accuracy."""
    real = targets != PAD_ID
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, targets)
    loss = jnp.sum(losses * real) / jnp.maximum(jnp.sum(real), 1)
    correct = (jnp.argmax(logits, -1) == targets) | ~real
    token_acc = jnp.sum(correct & real) / jnp.maximum(jnp.sum(real), 1)
    seq_acc = jnp.mean(jnp.all(correct, axis=1))
    return loss, {"loss": loss, "token_acc": token_acc, "seq_acc": seq_acc}


@dataclass(frozen=True, eq=False)
class Setup:
    """Everything fixed for a run: config, task, tokenizer, model and optimizer."""

    cfg: Config
    task: Task
    tokenizer: Tokenizer
    fns: ModelFns
    optimizer: optax.GradientTransformation
    symbol_ids: np.ndarray

    @classmethod
    def create(cls, cfg: Config, tokenizer: Tokenizer | None = None) -> "Setup":
        tokenizer = tokenizer or Tokenizer()
        return cls(
            cfg=cfg,
            task=make_task(cfg.task, tokenizer),
            tokenizer=tokenizer,
            fns=build(cfg.model, len(tokenizer)),
            optimizer=make_optimizer(cfg),
            symbol_ids=np.asarray(tokenizer.ids(cfg.task.alphabet), np.int32),
        )

    @cached_property
    def mesh(self) -> Mesh:
        """Every device JAX sees, on one data-parallel axis; the batch is split along it."""
        return Mesh(np.asarray(jax.devices()), ("data",))

    @cached_property
    def batch_sharding(self) -> NamedSharding:
        return NamedSharding(self.mesh, P("data"))

    @cached_property
    def replicated(self) -> NamedSharding:
        return NamedSharding(self.mesh, P())

    @property
    def max_out(self) -> int:
        """Decoder length: the longest target plus <eos>."""
        return self.task.target_length(self.cfg.task.max_len) + 1

    def sample(
        self,
        key: jax.Array,
        batch_size: int,
        min_len: int | None = None,
        max_len: int | None = None,
    ) -> Batch:
        t = self.cfg.task
        return self.task.sample(
            key,
            batch_size,
            t.min_len if min_len is None else min_len,
            t.max_len if max_len is None else max_len,
            jnp.asarray(self.symbol_ids),
        )

    def held_out(
        self, key: jax.Array, samples: int, min_len: int, max_len: int, each_length: bool = False
    ) -> Batch:
        return self.task.held_out(
            key, samples, min_len, max_len, jnp.asarray(self.symbol_ids), each_length
        )

    def positions(
        self, key: jax.Array, src: jax.Array, tgt_len: int
    ) -> tuple[jax.Array, jax.Array]:
        """The positions the model reads for sources [B, S] and targets [B, tgt_len].

        A randomized encoding draws, per sequence, as many as its source needs (length +
        <eos>) and as many as the longest answer that source can have: never the actual
        answer's length, which would tell the decoder when to stop.
        """
        limit = self.cfg.model.max_positions
        src_counts = jnp.sum(src != PAD_ID, axis=1)
        tgt_counts = jnp.minimum(self.task.expansion * src_counts, limit)
        src_key, tgt_key = jax.random.split(key)
        wide = min(self.task.expansion * src.shape[1], limit)  # >= tgt_len, see Task.expansion
        return (
            self.fns.positions(src_key, src_counts, src.shape[1]),
            self.fns.positions(tgt_key, tgt_counts, wide)[:, :tgt_len],
        )

    def init(self, seed: int) -> TrainingState:
        """Fresh parameters and optimizer state, in one jitted call (op by op it takes seconds)."""
        return jax.jit(self._init)(jnp.asarray(seed, jnp.uint32))

    def _init(self, seed: jax.Array) -> TrainingState:
        rng = jax.random.PRNGKey(seed)
        batch = self.sample(rng, 2)
        params = self.fns.init(jax.random.fold_in(rng, 99), batch.src, batch.tgt_in)
        return TrainingState(params, self.optimizer.init(params), rng, jnp.asarray(0, jnp.int32))

    def loss(self, params, key, batch: Batch, positions_key: jax.Array):
        src_positions, tgt_positions = self.positions(
            positions_key, batch.src, batch.tgt_in.shape[1]
        )
        logits, _ = self.fns.forward(
            params,
            key,
            batch.src,
            batch.tgt_in,
            is_training=True,
            src_positions=src_positions,
            tgt_positions=tgt_positions,
        )
        return cross_entropy(logits, batch.tgt_out)

    def update(self, state: TrainingState) -> tuple[TrainingState, dict]:
        """One optimizer step on a batch drawn from (rng, step)."""
        batch = self.sample(
            step_key(state.rng, TRAIN_STREAM, state.step), self.cfg.train.batch_size
        )
        batch = jax.lax.with_sharding_constraint(batch, self.batch_sharding)
        dropout_key = step_key(state.rng, DROPOUT_STREAM, state.step)
        positions_key = step_key(state.rng, POSITION_STREAM, state.step)
        grads, metrics = jax.grad(self.loss, has_aux=True)(
            state.params, dropout_key, batch, positions_key
        )
        updates, opt_state = self.optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        metrics["grad_norm"] = optax.global_norm(grads)
        return TrainingState(params, opt_state, state.rng, state.step + 1), metrics

    def train_chunk(self, state: TrainingState, num_steps: jax.Array):
        """Up to `log_every` steps in one dispatch; steps past `num_steps` are skipped."""

        def body(state, i):
            return jax.lax.cond(i < num_steps, self.update, self._skip, state)

        state, metrics = jax.lax.scan(body, state, jnp.arange(self.cfg.train.log_every))
        valid = jnp.arange(self.cfg.train.log_every) < num_steps
        mean = {k: jnp.sum(jnp.where(valid, v, 0)) / num_steps for k, v in metrics.items()}
        finite = jnp.isfinite(metrics["loss"]) & jnp.isfinite(metrics["grad_norm"])
        mean["finite"] = jnp.all(finite | ~valid)
        return state, mean

    def _skip(self, state: TrainingState):
        zero = jnp.asarray(0.0)
        return state, {"loss": zero, "token_acc": zero, "seq_acc": zero, "grad_norm": zero}


def evaluate(
    setup: Setup,
    params,
    key: jax.Array,
    samples: int,
    min_len: int | None = None,
    max_len: int | None = None,
    each_length: bool = False,
) -> dict:
    """Greedy-decode held-out sources; accuracies overall and per source length.

    `samples` sources with lengths uniform in [min_len, max_len], or, with `each_length`,
    `samples` sources at every length in that range.
    """
    min_len = setup.cfg.task.min_len if min_len is None else min_len
    max_len = setup.cfg.task.max_len if max_len is None else max_len
    sample_key, positions_key = jax.random.split(key)
    batch = setup.held_out(sample_key, samples, min_len, max_len, each_length)
    src, tgt_out = np.asarray(batch.src), np.asarray(batch.tgt_out)
    if not len(src):
        raise JabError(f"there are no held-out inputs with lengths {min_len}-{max_len}")
    max_out = tgt_out.shape[1]
    predicted = np.zeros((len(src), max_out), np.int32)
    for start in range(0, len(src), DECODE_CHUNK):
        chunk = src[start : start + DECODE_CHUNK]
        rows = len(chunk)
        if len(src) > DECODE_CHUNK:  # keep one shape, so one compilation
            chunk = np.pad(chunk, ((0, DECODE_CHUNK - rows), (0, 0)), constant_values=EOS_ID)
        positions = setup.positions(jax.random.fold_in(positions_key, start), chunk, max_out)
        decoded = greedy_decode(setup.fns, params, jnp.asarray(chunk), max_out, *positions)
        predicted[start : start + rows] = np.asarray(decoded)[:rows]
    return score(setup, src, predicted, tgt_out)


def score(setup: Setup, src: np.ndarray, predicted: np.ndarray, expected: np.ndarray) -> dict:
    width = max(predicted.shape[1], expected.shape[1])
    predicted = np.pad(predicted, ((0, 0), (0, width - predicted.shape[1])))
    expected = np.pad(expected, ((0, 0), (0, width - expected.shape[1])))
    real = expected != PAD_ID
    token_hits = (predicted == expected) & real
    exact = np.all(predicted == expected, axis=1)  # both are <pad>-filled after <eos>
    lengths = np.sum((src != PAD_ID) & (src != EOS_ID), axis=1)
    per_length = {}
    for length in np.unique(lengths):
        rows = lengths == length
        per_length[int(length)] = {
            "samples": int(rows.sum()),
            "token_acc": float(token_hits[rows].sum() / real[rows].sum()),
            "seq_acc": float(exact[rows].mean()),
        }
    decode = setup.tokenizer.decode
    examples = [
        {"input": decode(s), "output": decode(p), "expected": decode(e), "correct": bool(ok)}
        for s, p, e, ok in zip(src, predicted, expected, exact)
    ]
    return {
        "samples": int(len(src)),
        "token_acc": float(token_hits.sum() / real.sum()),
        "seq_acc": float(exact.mean()),
        "per_length": per_length,
        "examples": examples,
    }


Callback = Callable[[dict], None]


def check_devices(cfg: Config) -> None:
    devices = jax.device_count()
    if cfg.train.batch_size % devices:
        raise JabError(
            f"train.batch_size ({cfg.train.batch_size}) must divide evenly "
            f"over the {devices} devices"
        )


class Trainer:
    """The Python loop: chunks of jitted steps, periodic evaluation, early stop."""

    def __init__(self, setup: Setup, state: TrainingState | None = None):
        self.setup = setup
        check_devices(setup.cfg)
        state = state if state is not None else setup.init(setup.cfg.train.seed)
        self.state = jax.device_put(state, setup.replicated)
        self.chunk = jax.jit(
            setup.train_chunk, donate_argnums=0, out_shardings=(setup.replicated, setup.replicated)
        )

    def run(
        self,
        on_log: Callback = lambda m: None,
        on_eval: Callback = lambda m: None,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> dict:
        tr = self.setup.cfg.train
        start, start_step = time.perf_counter(), int(self.state.step)
        last_eval: dict = {}
        while int(self.state.step) < tr.steps and not should_stop():
            step_before = int(self.state.step)
            n = min(tr.log_every, tr.steps - step_before)
            tic = time.perf_counter()
            self.state, metrics = self.chunk(self.state, jnp.asarray(n, jnp.int32))
            metrics = jax.device_get(metrics)
            step = step_before + n
            if not metrics.pop("finite"):
                raise FloatingPointError(
                    f"loss became non-finite between steps {step_before} and {step}"
                )
            record = {
                "step": step,
                **{k: float(v) for k, v in metrics.items()},
                "lr": float(learning_rate_schedule(self.setup.cfg)(step - 1)),  # last one applied
                "steps_per_sec": n / (time.perf_counter() - tic),
                "elapsed_s": time.perf_counter() - start,
            }
            if step // tr.eval_every > step_before // tr.eval_every or step >= tr.steps:
                last_eval = evaluate(
                    self.setup,
                    self.state.params,
                    step_key(self.state.rng, EVAL_STREAM, step),
                    tr.eval_samples,
                )
                record["eval_token_acc"] = last_eval["token_acc"]
                record["eval_seq_acc"] = last_eval["seq_acc"]
                on_eval({**last_eval, "step": step})
            on_log(record)
            if last_eval and record.get("eval_seq_acc", 0.0) >= tr.target_seq_acc:
                break
        return {
            "step": int(self.state.step),
            "elapsed_s": time.perf_counter() - start,
            "start_step": start_step,
            "last_eval": last_eval,
        }


def state_to_arrays(state: TrainingState) -> dict[str, np.ndarray]:
    """The training state as named numpy arrays, for a pickle-free .npz checkpoint."""
    arrays = {"step": np.asarray(state.step), "rng": np.asarray(state.rng)}
    for prefix, tree in (("params", state.params), ("opt_state", state.opt_state)):
        for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
            arrays[prefix + jax.tree_util.keystr(path)] = np.asarray(leaf)
    return arrays


def state_from_arrays(setup: Setup, arrays: dict[str, np.ndarray]) -> TrainingState:
    """Rebuild a TrainingState, taking names, shapes and dtypes from the model's init."""
    template = jax.eval_shape(setup._init, jnp.asarray(0, jnp.uint32))
    trees = []
    for prefix, tree in (("params", template.params), ("opt_state", template.opt_state)):
        leaves, treedef = jax.tree_util.tree_flatten_with_path(tree)
        values = []
        for path, leaf in leaves:
            name = prefix + jax.tree_util.keystr(path)
            if name not in arrays or arrays[name].shape != leaf.shape:
                raise ValueError(f"checkpoint does not match the model ({name})")
            values.append(jnp.asarray(arrays[name], dtype=leaf.dtype))
        trees.append(jax.tree_util.tree_unflatten(treedef, values))
    return TrainingState(
        trees[0], trees[1], jnp.asarray(arrays["rng"]), jnp.asarray(arrays["step"], jnp.int32)
    )
