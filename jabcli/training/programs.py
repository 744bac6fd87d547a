"""The compiled training programs of an experiment: `init` of one seed or several, and the
training chunk, each compiled once per process for each model (`without_schedule`) and
kept on disk (`program_store.stored_program`); their shapes (`state_shapes`) and FLOP counts.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jabcli.core import memory, program_store, runtime
from jabcli.experiment.experiment import Experiment, build_model
from jabcli.model.positions import shapes_only
from jabcli.training.schedule import Schedule, without_schedule
from jabcli.training.step import TrainingState, init_state, loss_fn, train_chunk, training_rows

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
    return program_store.stored_program(experiment, name, lower, INIT_COMPILER_OPTIONS)


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
        # jax's stubs: None where a backend has no cost model, which `except` below catches
        return float(lowered.cost_analysis()["flops"])  # type: ignore[index]

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
    again; and kept on disk (`program_store.stored_program`), so that the next process running
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
    jitted = jax.jit(chunk, donate_argnums=0, out_shardings=(state_sharding, replicated))
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
    lower = functools.partial(jitted.lower, shapes, jax.ShapeDtypeStruct((), jnp.int32), schedule)
    program = program_store.stored_program(experiment, "train chunk", lower, donated=(0,))
    flops, loops = flops_per_step(program, tr.seeds), experiment.config.model.loops
    if flops and loops > 1:  # the count holds one pass
        per_pass = functools.partial(flops_per_pass, experiment)
        per_pass = runtime.remembered(experiment, "FLOP per pass", per_pass)
        flops = flops + (loops - 1) * per_pass if per_pass else None
    return Programs(program, state_sharding, parameters, flops, memory.program_bytes(program))
