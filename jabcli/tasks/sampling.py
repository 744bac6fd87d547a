"""Batches of a task, for training and evaluation, drawn from its `draw` in one place:
lengths uniform in a range (or each length in turn), answers cut and padded to the
decoder slots derived.py gives, sources ended by <eos>. A file task chooses its rows
from its data instead (`FileTask.sample`, `FileTask.held_out_batch`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jabcli.core.runtime import Lazy
from jabcli.core.tokenizer import PAD_ID
from jabcli.tasks import derived
from jabcli.tasks.batch import Batch, assemble
from jabcli.tasks.contract import Task

if TYPE_CHECKING:
    import jax
    import jax.numpy as jnp
else:
    jax, jnp = Lazy("jax"), Lazy("jax.numpy")


def sample(task: Task, key: jax.Array, batch_size: int, min_len: int, max_len: int) -> Batch:
    """A training batch: lengths uniform in [min_len, max_len]."""
    if not task.generated:
        from jabcli.tasks.datafile import FileTask  # imported already: the task is one

        assert isinstance(task, FileTask)  # the one task that is not generated
        return task.sample(key, batch_size, min_len, max_len)
    len_key, sym_key = jax.random.split(key)
    lengths = jax.random.randint(len_key, (batch_size,), min_len, max_len + 1)
    return sample_lengths(task, sym_key, lengths, max_len)


def held_out_batch(
    task: Task,
    key: jax.Array,
    samples: int,
    min_len: int,
    max_len: int,
    each_length: bool = False,
) -> Batch:
    """An evaluation batch: `samples` sources with lengths uniform in the range or, with
    `each_length`, `samples` sources at every length in it. Generated tasks draw them as
    they draw training batches, from a key training never uses."""
    if not task.generated:
        from jabcli.tasks.datafile import FileTask  # imported already: the task is one

        assert isinstance(task, FileTask)  # the one task that is not generated
        return task.held_out_batch(key, samples, min_len, max_len, each_length)
    if not each_length:
        return sample(task, key, samples, min_len, max_len)
    lengths = jnp.repeat(jnp.arange(min_len, max_len + 1), samples)
    return sample_lengths(task, key, lengths, max_len)


def sample_lengths(task: Task, key: jax.Array, lengths: jax.Array, max_len: int) -> Batch:
    """Sources of the given lengths [batch], each at most `max_len` symbols, as the task
    draws them (a task may draw another length, as modular_arithmetic draws odd ones:
    each source is as long as its tokens)."""
    tokens, target, target_lengths = task.draw(key, lengths, max_len)
    drawn = jnp.sum(tokens != PAD_ID, axis=1)
    target = target[:, : derived.answer_tokens(task, max_len)]
    return assemble(tokens, drawn, target, target_lengths, derived.answer_width(task, max_len))
