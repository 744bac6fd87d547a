"""Training: `Trainer.run` is the Python loop around the compiled programs
(programs.py) of one training step (step.py): it feeds chunks of `log_every` steps,
evaluates, and reports through callbacks; it never prints. `check` refuses, before
anything is written, a run that cannot train. The names of step.py, schedule.py and
programs.py are importable from here too.

`init(experiment, seed) -> TrainingState` and `train_chunk(experiment, state, n) ->
(state, metrics)` are jitted; a chunk draws each batch on the device from (seed, step),
so a run compiles once and the host is only asked for numbers once per chunk.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jabcli.core import memory, waiting
from jabcli.core.config import at_target
from jabcli.core.errors import JabError
from jabcli.core.spread import every_seed
from jabcli.evaluation.evaluate import HeldOut, check_evaluation_memory, evaluate
from jabcli.evaluation.figures import HeldOutResult
from jabcli.experiment.experiment import Experiment
from jabcli.runs.metrics import LogRecord
from jabcli.training.programs import (
    INIT_COMPILER_OPTIONS,
    Programs,
    compiled,
    compiled_init,
    compiled_init_of,
    compiled_of,
    flops_per_pass,
    flops_per_step,
    init,
    state_shapes,
)
from jabcli.training.schedule import (
    SCHEDULE_KEYS,
    Schedule,
    learning_rate,
    make_optimizer,
    without_schedule,
)
from jabcli.training.step import (
    DROPOUT_STREAM,
    EVAL_STREAM,
    POSITION_STREAM,
    TRAIN_STREAM,
    TrainingState,
    cross_entropy,
    init_state,
    loss_fn,
    rows_logits,
    step_key,
    train_chunk,
    training_rows,
    update,
)
from jabcli.training.trained import Trained

__all__ = [
    "DROPOUT_STREAM", "EVAL_STREAM", "INIT_COMPILER_OPTIONS", "POSITION_STREAM",
    "SCHEDULE_KEYS", "TRAIN_STREAM", "HeldOutResult", "Programs", "Schedule", "Trained",
    "Trainer", "TrainingState", "applied_rate", "check", "compiled", "compiled_init",
    "compiled_init_of", "compiled_of", "cross_entropy", "eval_key", "flops_per_pass",
    "flops_per_step", "init", "init_state", "learning_rate", "loss_fn", "make_optimizer",
    "rows_logits", "seed_state", "stack", "state_shapes", "step_key", "train_chunk",
    "training_rows", "update", "without_schedule",
]  # fmt: skip


# What the Python loop computes outside the training program, each one program: op by
# op, every operation would be a program of its own to lower and look up at each start
# (a tenth of a second or more of a small run's start).
eval_key = jax.jit(functools.partial(step_key, stream=EVAL_STREAM))
applied_rate = jax.jit(learning_rate, static_argnums=1)


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
        self.state = waiting.wait(jax.device_put(state, programs.state_sharding))

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
        on_log: Callable[[list[LogRecord]], None] = lambda records: None,
        on_eval: Callable[[list[HeldOutResult]], None] = lambda results: None,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> Trained:
        """Train to train.steps, or until every seed reached train.target_seq_acc (a seed
        that reached it keeps training with the others), or until `should_stop()`."""
        tr = self.experiment.config.train
        warms = tr.warmup_steps > 0
        start, start_step = time.perf_counter(), self.step
        step = start_step
        last_eval: list[HeldOutResult] = []
        while step < tr.steps and not should_stop():
            step_before, n = step, min(tr.log_every, tr.steps - step)
            tic = time.perf_counter()
            with waiting.polling(should_stop):  # a stored chunk's first run waits so too
                chunk = self.chunk(self.state, np.int32(n))
                self.state, metrics = waiting.wait(chunk)
            metrics = {k: np.reshape(v, -1) for k, v in jax.device_get(metrics).items()}
            step = step_before + n
            for seed, finite in zip(self.seeds, metrics.pop("finite")):
                if not finite:
                    which = f" (seed {seed})" if self.grouped else ""
                    raise FloatingPointError(
                        f"loss became non-finite between steps {step_before} and {step}{which}"
                    )
            seconds = time.perf_counter() - tic
            # the learning rate the chunk's last step applied
            rate = float(applied_rate(self.schedule, warms, step - 1))
            records = [
                LogRecord(
                    step=step,
                    loss=float(metrics["loss"][i]),
                    token_acc=float(metrics["token_acc"][i]),
                    seq_acc=float(metrics["seq_acc"][i]),
                    grad_norm=float(metrics["grad_norm"][i]),
                    lr=rate,
                    steps_per_sec=n / seconds,
                    elapsed_s=time.perf_counter() - start,
                )
                for i in range(len(self.seeds))
            ]
            evaluated = step // tr.eval_every > step_before // tr.eval_every or step >= tr.steps
            if evaluated:
                held_out = HeldOut(tr.eval_samples)
                last_eval = []
                for n, state in enumerate(self.states()):
                    result = evaluate(
                        self.experiment,
                        state.params,
                        eval_key(state.rng, step=step),
                        held_out,
                    )
                    records[n] = dataclasses.replace(
                        records[n],
                        eval_token_acc=result["token_acc"],
                        eval_seq_acc=result["seq_acc"],
                    )
                    reached = at_target(result["seq_acc"], tr.target_seq_acc)
                    last_eval.append(HeldOutResult(result, step, reached))
                on_eval(last_eval)
            on_log(records)
            if evaluated and every_seed([result.at_target for result in last_eval]):
                break
        return Trained(
            step=step,
            start_step=start_step,
            elapsed_s=time.perf_counter() - start,
            last_eval=last_eval,
            at_target=[result.at_target for result in last_eval],
        )
