"""Training as pure functions around one state value.

`init(experiment, seed) -> TrainingState` and `train_chunk(experiment, state, n) ->
(state, metrics)` are jitted;
a chunk runs `log_every` steps inside one `lax.scan`, drawing each batch on the device
from (seed, step), so a run compiles once and the host is only asked for numbers
once per chunk. `Trainer.run` is the Python loop: it feeds chunks, evaluates, saves
and reports through callbacks; it never prints.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jabcli.core import memory, runtime
from jabcli.core.config import at_target
from jabcli.core.errors import JabError
from jabcli.core.settings import TrainConfig
from jabcli.core.tokenizer import PAD_ID
from jabcli.evaluation.evaluate import HeldOut, Scores, check_evaluation_memory, evaluate
from jabcli.model.experiment import Experiment, build_model
from jabcli.model.positions import shapes_only
from jabcli.tasks import derived, sampling
from jabcli.training import packing
from jabcli.training.packing import Rows

# Independent random streams folded from a run's root key: one per use, never shared.
TRAIN_STREAM, DROPOUT_STREAM, EVAL_STREAM, POSITION_STREAM = 0, 1, 2, 3


class TrainingState(NamedTuple):
    params: Any
    opt_state: Any
    rng: jax.Array  # the run's root key; batch and dropout keys are folded from it by step
    step: jax.Array


class Schedule(NamedTuple):
    """The numbers of the learning-rate schedule, linear warmup from 0 to `peak` then
    cosine decay to train.final_lr_fraction of it at train.steps (`learning_rate`). The
    training program takes them as values, not constants, so that configs which differ
    only in these numbers (`SCHEDULE_KEYS`) share one compiled program: a run extended
    with more steps, or a study's rows of learning rates, compile once.

    optax's own `warmup_cosine_decay_schedule` cannot be built inside the program from
    these numbers as traced values: it takes its step counts as Python ints and branches
    on its arguments in Python (`peak_value == 0.0`, `transition_steps <= 0`,
    `decay_steps > 0`), which a traced value refuses (TracerBoolConversionError). Hence
    `learning_rate`, whose bits a test checks against optax's."""

    peak: Any  # float32
    warmup: Any  # int32: steps of warmup
    per_warmup: Any  # float32: 1 / warmup
    decay: Any  # float32: steps of decay after warmup
    per_decay: Any  # float32: 1 / decay
    keep: Any  # float32: 1 - end / peak
    end: Any  # float32: end / peak

    @classmethod
    def of(cls, tr: TrainConfig) -> Schedule:
        """The numbers optax.warmup_cosine_decay_schedule computes from train's options,
        in double precision on the host, as it does; then as 32-bit values, with the
        reciprocals XLA makes of a division by a constant."""
        f32, peak = np.float32, tr.learning_rate
        warmup = min(tr.warmup_steps, tr.steps)
        decay = max(tr.steps, tr.warmup_steps + 1) - warmup
        end = peak * tr.final_lr_fraction / peak if peak else 0.0  # as optax computes it
        per_warmup = f32(1) / f32(warmup) if warmup else f32(np.inf)
        return cls(f32(peak), np.int32(warmup), per_warmup, f32(decay),
                   f32(1) / f32(decay), f32(1 - end), f32(end))  # fmt: skip


SCHEDULE_KEYS = ("steps", "learning_rate", "warmup_steps", "final_lr_fraction")


def learning_rate(schedule: Schedule, warms: bool, count: jax.Array) -> jax.Array:
    """The learning rate at optimizer step `count`, the same bits as the program XLA
    compiles of optax.warmup_cosine_decay_schedule with the schedule's numbers as
    constants: the same operations in the same order (a division by a constant is a
    product with its reciprocal), and, as there, no rising part without warmup
    (`warms`, which the program is compiled for)."""
    s = schedule
    rising = -s.peak * (1 - jnp.clip(count, 0, s.warmup) * s.per_warmup) ** 1 + s.peak
    start = s.warmup if warms else 0
    after = jnp.minimum(count - start, s.decay)
    cosine = 0.5 * (1 + jnp.cos((jnp.pi * after) * s.per_decay))
    falling = s.peak * (s.keep * cosine**1.0 + s.end)
    return jnp.where(count < start, rising if warms else 0.0, falling)


def make_optimizer(tr: TrainConfig, schedule: Schedule) -> optax.GradientTransformation:
    """AdamW with linear warmup then cosine decay, after global-norm clipping."""
    return optax.chain(
        optax.clip_by_global_norm(tr.clip_norm) if tr.clip_norm > 0 else optax.identity(),
        optax.adamw(
            functools.partial(learning_rate, schedule, tr.warmup_steps > 0),
            b1=0.9,
            b2=tr.adam_b2,
            weight_decay=tr.weight_decay,
        ),
    )


def without_schedule(experiment: Experiment) -> Experiment:
    """The experiment with its schedule's numbers (`SCHEDULE_KEYS`) at their defaults
    (but for no warmup): what its training programs are compiled from, which take those
    numbers as values."""
    tr = experiment.config.train
    defaults = {key: getattr(TrainConfig(), key) for key in SCHEDULE_KEYS}
    if tr.warmup_steps == 0:  # a schedule without warmup is another program
        defaults["warmup_steps"] = 0
    config = dataclasses.replace(experiment.config, train=dataclasses.replace(tr, **defaults))
    return dataclasses.replace(experiment, config=config)


def step_key(rng: jax.Array, stream: int, step) -> jax.Array:
    return jax.random.fold_in(jax.random.fold_in(rng, stream), step)


# What the Python loop computes outside the training program, each one program: op by
# op, every operation would be a program of its own to lower and look up at each start
# (a tenth of a second or more of a small run's start).
eval_key = jax.jit(functools.partial(step_key, stream=EVAL_STREAM))
applied_rate = jax.jit(learning_rate, static_argnums=1)


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


# Initialisation runs once per run: XLA's backend optimizations would cost more
# compilation time (about 1.4 s of 3.4 s for the reverse preset) than they could save.
INIT_COMPILER_OPTIONS = {"xla_backend_optimization_level": 0}


@functools.cache
def state_shapes(experiment: Experiment) -> TrainingState:
    """The shapes and dtypes of one seed's training state, traced once and then kept
    (runtime.remembered) for every schedule of the model, since every command that
    loads or trains a model needs them.
    Nothing is computed: a model too big for memory is refused with these shapes first."""

    def trace() -> TrainingState:
        with shapes_only():
            return jax.eval_shape(functools.partial(init_state, experiment), jnp.uint32(0))

    return runtime.remembered(without_schedule(experiment), "state shapes", trace)


def init(experiment: Experiment, seed: int) -> TrainingState:
    """`init_state` in one jitted call (op by op it takes seconds), as the Trainer makes it."""
    return compiled_init(experiment, 1)(jnp.asarray(seed, jnp.uint32))


def compiled_init(experiment: Experiment, seeds: int) -> Callable:
    """`init_state` for `seeds` seeds at once (several: along a leading axis), compiled
    once per process for each model (`without_schedule`) and kept on disk as the
    training chunk is, fast rather than optimized: it runs once per run."""
    return compiled_init_of(without_schedule(experiment), seeds)


@functools.lru_cache(maxsize=4)
def compiled_init_of(experiment: Experiment, seeds: int) -> Callable:
    make = functools.partial(init_state, experiment)
    if seeds > 1:
        make = jax.vmap(make)
    shape = (seeds,) if seeds > 1 else ()
    lower = functools.partial(jax.jit(make).lower, jax.ShapeDtypeStruct(shape, jnp.uint32))
    name = f"init {seeds} seeds"
    return runtime.stored_program(experiment, name, lower, INIT_COMPILER_OPTIONS)


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
    grads, metrics = jax.grad(functools.partial(loss_fn, experiment), has_aux=True)(
        state.params, dropout_key, rows
    )
    optimizer = make_optimizer(tr, schedule)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics["grad_norm"] = optax.tree.norm(grads)
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


Callback = Callable[[list[dict]], None]  # receives one record (or result) per seed


class HeldOutResult(Scores):
    """One seed's held-out evaluation as `Trainer.run` reports it (`on_eval`): its scores,
    the step it was made at, and whether it reached train.target_seq_acc."""

    step: int
    at_target: bool


@dataclasses.dataclass
class Trained:
    """What `Trainer.run` did: the step it stopped at and the step it started from, its
    wall time, each seed's last held-out evaluation (empty: none) and whether each of
    them reached train.target_seq_acc, as the loop decided when to stop."""

    step: int
    start_step: int
    elapsed_s: float
    last_eval: list[HeldOutResult]
    at_target: list[bool]

    @property
    def reached_target(self) -> bool:
        """Every seed reached the target (the Trainer's reason to stop early)."""
        return bool(self.at_target) and all(self.at_target)


def check(experiment: Experiment) -> tuple[int, str]:
    """Refuse, before anything is written or allocated, a run whose batch cannot be packed
    or does not divide over the devices, whose parameters and optimizer state (of every
    seed) do not fit in memory, or whose loggers cannot log. Returns the state's size in
    bytes, and the options that set it."""
    from jabcli.runs import loggers

    tr = experiment.config.train
    loggers.check(experiment.config)
    devices = jax.device_count()
    unpacked = {"lengths": "per_row", "loss_average": "tokens"}  # what packing takes
    for key, value in unpacked.items():
        if getattr(tr, key) != value and experiment.packs:
            raise JabError(
                f"train.{key}={getattr(tr, key)} trains one example per row: set train.pack=false"
            )
    if tr.lengths == "per_batch" and not experiment.task.generated:
        raise JabError(
            f"train.lengths=per_batch draws the batch's length; task {experiment.task.label} "
            "chooses its rows from its data"
        )
    if experiment.packs and tr.batch_size % 2:
        raise JabError(
            f"train.batch_size must be even to pack two examples per row, got "
            f"{tr.batch_size} (or set train.pack=false)"
        )
    rows = tr.batch_size // 2 if experiment.packs else tr.batch_size
    if tr.seeds == 1 and rows % devices:
        packed = f", packed two examples per row into {rows} rows," if experiment.packs else ""
        raise JabError(
            f"train.batch_size ({tr.batch_size}){packed} must divide evenly over the "
            f"{devices} devices"
        )
    state_bytes = tr.seeds * memory.tree_bytes(state_shapes(experiment))
    sizes = "the model's size (model.d_model, model.d_ff, model.num_layers)"
    if tr.seeds > 1:
        sizes = f"train.seeds or {sizes}"
    what = f"{tr.seeds} models with their" if tr.seeds > 1 else "the model with its"
    memory.check(state_bytes, f"holding {what} optimizer state", sizes)
    return state_bytes, sizes


@jax.jit
def seed_state(state: TrainingState, i: int) -> TrainingState:
    """Seed `i`'s state out of a state with a leading seeds axis."""
    return jax.tree_util.tree_map(lambda x: x[i], state)


def stack(states: list[TrainingState]) -> TrainingState:
    """Several seeds' states as one, along a leading seeds axis."""
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *states)


def flops_per_step(compiled, seeds: int) -> float | None:
    """One seed's floating-point operations per training step, from XLA's cost analysis
    of the compiled chunk, or None where the backend gives none. The chunk's steps are
    a loop, whose body (one step of every seed) the analysis counts once."""
    try:
        costs = compiled.cost_analysis()
    except Exception:  # backends without a cost model raise various errors
        return None
    if isinstance(costs, list):  # older JAX: one dict per computation
        costs = costs[0] if costs else {}
    flops = (costs or {}).get("flops")
    return float(flops) / seeds if flops and flops > 0 else None


def flops_per_pass(experiment: Experiment) -> float | None:
    """One seed's floating-point operations per training step in each pass through the
    layers (model.loops), or None where the backend counts none. The passes are a loop,
    which XLA's cost analysis counts once: a pass is what twice the layers add to the
    gradients of the same model with one pass (lowered, not compiled)."""

    def count(num_layers: int) -> float:
        model = dataclasses.replace(experiment.config.model, num_layers=num_layers, loops=1)
        config = dataclasses.replace(experiment.config, model=model)
        fns = build_model(
            model,
            experiment.src_scheme,
            experiment.tgt_scheme,
            len(experiment.tokenizer),
            experiment.task,
        )
        variant = dataclasses.replace(experiment, config=config, model=fns)
        params = jax.eval_shape(functools.partial(init_state, variant), jnp.uint32(0)).params

        def gradients(params, key):
            rows = training_rows(variant, key, key)
            return jax.grad(functools.partial(loss_fn, variant), has_aux=True)(params, key, rows)

        lowered = jax.jit(gradients).lower(params, jax.random.PRNGKey(0))
        return float(lowered.cost_analysis()["flops"])

    layers = experiment.config.model.num_layers
    try:
        return count(2 * layers) - count(layers)
    except Exception:  # backends without a cost model raise various errors
        return None


class Programs(NamedTuple):
    """An experiment's compiled training chunk, and what the Trainer reads off it."""

    chunk: Any  # (state, steps) -> (state, metrics), compiled
    state_sharding: NamedSharding
    parameters: int  # one seed's
    flops: float | None  # one seed's, per step
    chunk_bytes: int  # what the chunk needs at its peak (`memory.program_bytes`)


def compiled(experiment: Experiment) -> Programs:
    """The experiment's training programs, compiled once per process for each experiment
    less its schedule's numbers (`without_schedule`; equal configs are one experiment):
    a second run of the same config in a Python session, such as a notebook's, or one
    with another number of steps or learning rate, starts without tracing or compiling
    again; and kept on disk (`runtime.stored_program`), so that the next process running
    it neither traces nor lowers it. The program is called as `chunk(state, steps,
    schedule)`.

    Every device JAX sees is on one mesh axis. One seed: each batch is split along it,
    parameters and optimizer state are replicated. Several seeds (train.seeds): the
    state has a leading seeds axis, one `vmap`ped chunk trains every seed, and the seeds
    are split over the devices when their number divides evenly (else every device
    computes every seed)."""
    return compiled_of(without_schedule(experiment))


@functools.lru_cache(maxsize=4)
def compiled_of(experiment: Experiment) -> Programs:
    tr = experiment.config.train
    grouped = tr.seeds > 1
    mesh = Mesh(np.asarray(jax.devices()), ("data",))
    replicated = NamedSharding(mesh, P())
    if grouped:
        split = tr.seeds % jax.device_count() == 0
        state_sharding = NamedSharding(mesh, P("data")) if split else replicated
        chunk = jax.vmap(functools.partial(train_chunk, experiment), in_axes=(0, None, None))
    else:
        state_sharding = replicated
        batches = NamedSharding(mesh, P("data"))
        chunk = functools.partial(train_chunk, experiment, batch_sharding=batches)
    chunk = jax.jit(chunk, donate_argnums=0, out_shardings=(state_sharding, replicated))
    # Compiled from shapes alone, so that a run too big for the machine is refused
    # before a single buffer is allocated.
    lead = (tr.seeds,) if grouped else ()
    shapes = jax.tree_util.tree_map(
        lambda x: jax.ShapeDtypeStruct(lead + x.shape, x.dtype, sharding=state_sharding),
        state_shapes(experiment),
    )
    parameters = sum(x.size for x in jax.tree_util.tree_leaves(shapes.params)) // tr.seeds
    schedule = jax.tree_util.tree_map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), Schedule.of(tr)
    )
    lower = functools.partial(chunk.lower, shapes, jax.ShapeDtypeStruct((), jnp.int32), schedule)
    program = runtime.stored_program(experiment, "train chunk", lower, donated=(0,))
    flops, loops = flops_per_step(program, tr.seeds), experiment.config.model.loops
    if flops and loops > 1:  # the count holds one pass
        per_pass = functools.partial(flops_per_pass, experiment)
        per_pass = runtime.remembered(experiment, "FLOP per pass", per_pass)
        flops = flops + (loops - 1) * per_pass if per_pass else None
    return Programs(program, state_sharding, parameters, flops, memory.program_bytes(program))


class Trainer:
    """The Python loop: chunks of jitted steps (`compiled`), periodic evaluation, early
    stop. Callbacks receive one record per seed."""

    def __init__(self, experiment: Experiment, states: list[TrainingState] | None = None):
        self.experiment = experiment
        tr = experiment.config.train
        state_bytes, sizes = check(experiment)
        self.seeds = tr.group
        self.grouped = tr.seeds > 1
        programs = compiled(experiment)
        self.schedule = jax.device_put(Schedule.of(tr))
        self.chunk = lambda state, steps: programs.chunk(state, steps, self.schedule)
        self.flops, self.parameters = programs.flops, programs.parameters
        memory.check(
            programs.chunk_bytes + state_bytes,
            "a training step",
            f"train.batch_size, task.max_len or {sizes}",
        )
        check_evaluation_memory(
            experiment, tr.eval_samples, "train.eval_samples", longest="task.max_len"
        )
        if states is None:
            seeds = np.asarray(tr.group, dtype=np.uint32)
            state = compiled_init(experiment, tr.seeds)(seeds if self.grouped else seeds[0])
        else:
            state = stack(states) if self.grouped else states[0]
        self.state = runtime.wait(jax.device_put(state, programs.state_sharding))

    @property
    def step(self) -> int:
        return int(np.reshape(jax.device_get(self.state.step), -1)[0])

    def states(self) -> list[TrainingState]:
        """Each seed's state, in the order of `seeds`."""
        if not self.grouped:
            return [self.state]
        return [seed_state(self.state, i) for i in range(len(self.seeds))]

    def run(
        self,
        on_log: Callback = lambda records: None,
        on_eval: Callback = lambda results: None,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> Trained:
        """Train to train.steps, or until every seed reached train.target_seq_acc (a seed
        that reached it keeps training with the others), or until `should_stop()`."""
        tr = self.experiment.config.train
        warms = tr.warmup_steps > 0
        start, start_step = time.perf_counter(), self.step
        step, last_eval = start_step, []
        while step < tr.steps and not should_stop():
            step_before, n = step, min(tr.log_every, tr.steps - step)
            tic = time.perf_counter()
            with runtime.polling(should_stop):  # a stored chunk's first run waits so too
                chunk = self.chunk(self.state, np.int32(n))
                self.state, metrics = runtime.wait(chunk)
            metrics = {k: np.reshape(v, -1) for k, v in jax.device_get(metrics).items()}
            step = step_before + n
            for seed, finite in zip(self.seeds, metrics.pop("finite")):
                if not finite:
                    which = f" (seed {seed})" if self.grouped else ""
                    raise FloatingPointError(
                        f"loss became non-finite between steps {step_before} and {step}{which}"
                    )
            seconds = time.perf_counter() - tic
            records = [
                {
                    "step": step,
                    **{k: float(v[i]) for k, v in metrics.items()},
                    # the learning rate the chunk's last step applied
                    "lr": float(applied_rate(self.schedule, warms, step - 1)),
                    "steps_per_sec": n / seconds,
                    "elapsed_s": time.perf_counter() - start,
                }
                for i in range(len(self.seeds))
            ]
            evaluated = step // tr.eval_every > step_before // tr.eval_every or step >= tr.steps
            if evaluated:
                held_out = HeldOut(tr.eval_samples)
                last_eval = []
                for state, record in zip(self.states(), records):
                    result = evaluate(
                        self.experiment,
                        state.params,
                        eval_key(state.rng, step=step),
                        held_out,
                    )
                    record["eval_token_acc"] = result["token_acc"]
                    record["eval_seq_acc"] = result["seq_acc"]
                    reached = at_target(result["seq_acc"], tr.target_seq_acc)
                    last_eval.append({**result, "step": step, "at_target": reached})
                on_eval(last_eval)
            on_log(records)
            if evaluated and all(result["at_target"] for result in last_eval):
                break
        return Trained(
            step=step,
            start_step=start_step,
            elapsed_s=time.perf_counter() - start,
            last_eval=last_eval,
            at_target=[result["at_target"] for result in last_eval],
        )
