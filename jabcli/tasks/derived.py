"""What jab derives from a task's contract about its sequences, in one place: how many
tokens a source and its answer take, the decoder slots a batch needs, the widths of a
packed row, which tasks take index hints or coupled positions, and the alignment that
coupled positions read. The model, decoding, evaluation and memory checks ask these,
never the task itself; a task says only `output_length` (and `reads` or `alignment`).

Index hints (`Hinted`) put a hint before every symbol: two tokens a symbol, on both
sides; every count here follows from that and the task's `output_length`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jabcli.core.runtime import Lazy
from jabcli.tasks.batch import UNALIGNED, columns, source_lengths
from jabcli.tasks.contract import Task
from jabcli.tasks.hinted import Hinted

if TYPE_CHECKING:
    import jax
    import jax.numpy as jnp
else:
    jax, jnp = Lazy("jax"), Lazy("jax.numpy")


def tokens_per_symbol(task: Task) -> int:
    """2 with index hints (a hint and the symbol), else 1."""
    return 2 if isinstance(task, Hinted) else 1


def answer_tokens(task: Task, length):
    """The tokens of the longest answer to a source of `length` symbols (an int or an int
    array), before its <eos>."""
    return tokens_per_symbol(task) * task.output_length(length)


def answer_width(task: Task, length):
    """Decoder slots for sources of up to `length` symbols (an int or an int array): the
    longest answer and its <eos>."""
    return answer_tokens(task, length) + 1


def answer_symbols(task: Task) -> str:
    """The symbols a task's answers are written in: its classes where it has them (a
    class task's digits, a stack's or a binary number's 0 and 1), else its alphabet and
    the symbols its answers write beyond it."""
    return getattr(task, "classes", None) or task.alphabet + task.symbols


def widths(task: Task, max_len: int) -> tuple[int, int]:
    """The source and answer widths of sources of up to `max_len` symbols, each with its
    <eos>: the arrays a batch of them is made of, and the positions they need."""
    return int(tokens_per_symbol(task) * max_len + 1), int(answer_width(task, max_len))


def answer_slots(task: Task, src: jax.Array) -> jax.Array:
    """[B] decoder slots each source of src [B, S] may use: its longest answer and <eos>."""
    return answer_width(task, source_lengths(src) // tokens_per_symbol(task))


def exact_slots(task: Task, src: jax.Array) -> jax.Array:
    """[B] the answer slots of model.answer_slots=exact, the paper's, for sources src [B, S]:
    one per symbol of the longest answer, and one for its <eos> only where the task's
    answers vary in length and end in a marker (`end_scored`)."""
    return answer_slots(task, src) - (0 if task.end_scored else 1)


def answer_width_for(task: Task, src_width: int) -> int:
    """Decoder slots for a source batch `src_width` tokens wide (its <eos> included)."""
    return answer_width(task, (src_width - 1) // tokens_per_symbol(task))


def packed_widths(task: Task, min_len: int, max_len: int) -> tuple[int, int]:
    """Source and target widths of a packed row (packing.py): the most tokens (with each
    example's <eos>) a pair of complementary lengths of sources can need."""
    total = min_len + max_len
    pairs = [(n, total - n) for n in range(min_len, max_len + 1)]
    source = max(widths(task, a)[0] + widths(task, b)[0] for a, b in pairs)
    target = max(widths(task, a)[1] + widths(task, b)[1] for a, b in pairs)
    return source, target


def model_sources(task: Task, rows: list[list[int]], key: jax.Array) -> list[list[int]]:
    """Users' source ids as the model reads them: with index hints, drawn from `key` as
    training and evaluation draw them."""
    return task.with_hints(rows, key) if isinstance(task, Hinted) else rows


def defines(task: Task, member: str) -> bool:
    """Whether the task's class defines `member` of the contract itself."""
    return getattr(type(task), member) is not getattr(Task, member)


def hintable(task: Task) -> bool:
    """Whether the task can have index hints: each answer symbol is an input symbol."""
    return defines(task, "reads")


def aligned(task: Task) -> bool:
    """Whether the task says which input symbol each answer symbol reads (coupled
    positions need it). A task with a scratchpad option aligns only its working, so only
    with the working written."""
    return defines(task, "reads") or (
        defines(task, "alignment") and getattr(task, "scratchpad", True)
    )


def alignment(task: Task, src: jax.Array, width: int) -> tuple[jax.Array, jax.Array]:
    """`Task.alignment`: the task's own, or, from `reads`, each source symbol's column and
    the column each answer step reads."""
    if defines(task, "alignment"):
        return task.alignment(src, width)
    lengths = source_lengths(src)[:, None]
    source = jnp.where(columns(src) < lengths, columns(src), UNALIGNED)
    steps = columns(src, width)
    answer = jnp.where(steps < task.output_length(lengths), task.reads(steps, lengths), UNALIGNED)
    return source.astype(jnp.int32), answer.astype(jnp.int32)
