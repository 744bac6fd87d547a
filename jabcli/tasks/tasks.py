"""The task contract and the tasks on strings: one small class each (registry.py names
them, arithmetic.py holds the tasks on numbers).

A task turns a batch of random source sequences into their targets with array
operations (no per-example Python loop), so batches are drawn on the device inside
the jitted train step. `solve` is the plain-Python reference the samplers are tested
against and `jab predict` marks answers with.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from itertools import pairwise
from typing import ClassVar, NamedTuple

from jabcli.core.errors import JabError
from jabcli.core.runtime import Lazy
from jabcli.core.tokenizer import BOS_ID, EOS_ID, HINTS, PAD_ID, Tokenizer

jax, jnp = Lazy("jax"), Lazy("jax.numpy")  # so that `jab tasks` does not import JAX

UNALIGNED = -2  # alignment index of tokens that read no input symbol (see Task.alignment)


class Batch(NamedTuple):
    """Padded id arrays: `src` [batch, src_len], `tgt_in`/`tgt_out` [batch, tgt_len].

    `src` is the source followed by <eos>.
    `tgt_in` is <bos> + target, `tgt_out` is target + <eos>: the decoder reads one and
    predicts the other.
    """

    src: jax.Array
    tgt_in: jax.Array
    tgt_out: jax.Array


@dataclass(frozen=True)
class Task:
    """A sequence-to-sequence task over an alphabet, with its options as fields.

    `targets` maps a padded batch of sources to its targets; tasks whose sources are not
    uniform strings override `sample_lengths` (addition) or `sample` and `held_out_batch`
    (pairs read from a file). `output_length` is the one description of how long an
    answer can be: decoder length, positions needed and randomized draws follow from it
    (through `answer_tokens` and `source_tokens`, which `Hinted` doubles).
    """

    alphabet: str = ""  # what sources are drawn from; "" means `default_alphabet`
    tokenizer: Tokenizer = field(default_factory=Tokenizer, compare=False, repr=False)

    index_hints: ClassVar[bool] = False  # whether symbols come with index hints (Hinted)
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    default_alphabet: ClassVar[str] = "0123456789"
    fixed_alphabet: ClassVar[bool] = False  # True when task.alphabet may not change it
    min_length: ClassVar[int] = 1  # shortest valid source
    generated: ClassVar[bool] = True  # drawn by JAX code alone, so it can be jitted
    level: ClassVar[str] = ""  # its level in the Chomsky hierarchy (Delétang et al. 2023)
    end_scored: ClassVar[bool] = False  # whether their score counts the answer's end too

    def __post_init__(self) -> None:
        if not self.alphabet:
            object.__setattr__(self, "alphabet", self.default_alphabet)

    @classmethod
    def options(cls) -> list[str]:
        """The task's own options: `task.<name>` config keys passed to its constructor."""
        return [f.name for f in fields(cls) if f.name not in ("alphabet", "tokenizer")]

    @property
    def label(self) -> str:
        """How messages name the task: its name (a file task: file:PATH)."""
        return self.name

    @property
    def symbol_ids(self) -> jax.Array:
        """[len(alphabet)] the alphabet's token ids."""
        return jnp.asarray(self.tokenizer.ids(self.alphabet), jnp.int32)

    def solve(self, text: str) -> str | None:
        """The reference answer; None when the task has none for `text`."""
        raise NotImplementedError

    def check_input(self, text: str) -> None:
        """Raise a JabError when `text` is not a valid source for this task."""

    def check_lengths(self, min_len: int, max_len: int) -> None:
        """Raise a JabError when the task cannot train on lengths min_len-max_len."""

    def output_length(self, length):
        """The longest answer to a source of `length` symbols (an int or an int array)."""
        return length

    # The sequence layout: how many tokens, slots and positions `length` symbols take.
    # Every count elsewhere (decoder slots, packed rows, positions, memory) asks these.

    def source_tokens(self, length):
        """The tokens of a source of `length` symbols, before its <eos>."""
        return length

    def answer_tokens(self, length):
        """The tokens of the longest answer to a source of `length` symbols, before its
        <eos>."""
        return self.output_length(length)

    def symbols_in(self, tokens: int) -> int:
        """The most symbols a source of `tokens` tokens (before its <eos>) holds."""
        return tokens

    def symbol_counts(self, src: jax.Array) -> jax.Array:
        """[batch] the symbols of each source in a batch."""
        return source_lengths(src)

    def answer_width(self, length):
        """Decoder slots for sources of up to `length` symbols (an int or an int array):
        the longest answer and its <eos>."""
        return self.answer_tokens(length) + 1

    def answer_width_for(self, src_width: int) -> int:
        """Decoder slots for a source batch `src_width` tokens wide (its <eos> included)."""
        return self.answer_width(self.symbols_in(src_width - 1))

    def positions_needed(self, max_len: int) -> int:
        """Model positions that sources of up to `max_len` symbols need: the longer of
        source + <eos> and answer + <eos>."""
        return max(self.source_tokens(max_len) + 1, self.answer_width(max_len))

    def packed_widths(self, min_len: int, max_len: int) -> tuple[int, int]:
        """Source and target widths of a packed row (packing.py): the most tokens (with
        each example's <eos>) a pair of complementary lengths of sources can need."""
        total = min_len + max_len
        pairs = [(n, total - n) for n in range(min_len, max_len + 1)]
        source = max(int(self.source_tokens(a)) + int(self.source_tokens(b)) + 2 for a, b in pairs)
        target = max(int(self.answer_width(a)) + int(self.answer_width(b)) for a, b in pairs)
        return source, target

    @property
    def hintable(self) -> bool:
        """Whether the task can have index hints: each answer symbol is an input symbol."""
        return type(self).reads is not Task.reads

    def model_sources(self, rows: list[list[int]], key: jax.Array) -> list[list[int]]:
        """Users' source ids as the model reads them (`Hinted` adds index hints, drawn
        from `key` as training and evaluation draw them)."""
        return rows

    def targets(self, tokens: jax.Array, lengths: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Source ids [batch, max_len] (padded with <pad>) -> target ids and lengths."""
        raise NotImplementedError

    @property
    def aligned(self) -> bool:
        """Whether the task declares which input symbol each answer symbol reads."""
        cls = type(self)
        return cls.reads is not Task.reads or cls.alignment is not Task.alignment

    def reads(self, steps: jax.Array, lengths: jax.Array) -> jax.Array:
        """The input index answer step `steps` [1, W] reads, for sources of `lengths`
        [B, 1]: [B, W]. Only tasks whose answer symbols are input symbols define it."""
        raise NotImplementedError

    def alignment(self, src: jax.Array, width: int) -> tuple[jax.Array, jax.Array]:
        """What coupled positions couple, known from the input alone so that it is known
        while decoding: src [B, S] (source + <eos>) -> (an index per source token [B, S],
        an index per answer step [B, width]). An answer step and the source tokens with
        the same index are aligned; UNALIGNED marks <eos>, separators, the step that
        writes <eos> and steps past it."""
        lengths = source_lengths(src)[:, None]
        source = jnp.where(columns(src) < lengths, columns(src), UNALIGNED)
        steps = columns(src, width)
        answer = jnp.where(
            steps < self.output_length(lengths), self.reads(steps, lengths), UNALIGNED
        )
        return source.astype(jnp.int32), answer.astype(jnp.int32)

    def sample(self, key: jax.Array, batch_size: int, min_len: int, max_len: int) -> Batch:
        """A training batch: lengths uniform in [min_len, max_len], symbols uniform."""
        len_key, sym_key = jax.random.split(key)
        lengths = jax.random.randint(len_key, (batch_size,), min_len, max_len + 1)
        return self.sample_lengths(sym_key, lengths, max_len)

    def held_out_batch(
        self, key: jax.Array, samples: int, min_len: int, max_len: int, each_length: bool = False
    ) -> Batch:
        """An evaluation batch: `samples` sources with lengths uniform in the range or,
        with `each_length`, `samples` sources at every length in it. Generated tasks draw
        them as they draw training batches, from a key training never uses."""
        if not each_length:
            return self.sample(key, samples, min_len, max_len)
        lengths = jnp.repeat(jnp.arange(min_len, max_len + 1), samples)
        return self.sample_lengths(key, lengths, max_len)

    def sample_lengths(self, key: jax.Array, lengths: jax.Array, max_len: int) -> Batch:
        """Sources of the given lengths [batch], each at most `max_len`, symbols uniform."""
        tokens, target, target_lengths = self.sample_symbols(key, lengths, max_len)
        return assemble(tokens, lengths, target, target_lengths, self.answer_width(max_len))

    def sample_symbols(
        self, key: jax.Array, lengths: jax.Array, max_len: int
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Sources of the given lengths [batch, max_len] (symbols uniform, <pad> after),
        their targets and the targets' lengths."""
        symbol_ids = self.symbol_ids
        choice = jax.random.randint(key, (lengths.shape[0], max_len), 0, symbol_ids.shape[0])
        valid = jnp.arange(max_len)[None, :] < lengths[:, None]
        tokens = jnp.where(valid, symbol_ids[choice], PAD_ID)
        return (tokens, *self.targets(tokens, lengths))


def assemble(
    tokens: jax.Array,
    lengths: jax.Array,
    target: jax.Array,
    target_lengths: jax.Array,
    tgt_len: int,
) -> Batch:
    """Padded sources and targets with their lengths -> the arrays the model reads."""
    tgt_in, tgt_out = decoder_arrays(target, target_lengths, tgt_len)
    return Batch(source_array(tokens, lengths), tgt_in, tgt_out)


def source_array(tokens: jax.Array, lengths: jax.Array) -> jax.Array:
    """Padded ids [batch, L] -> [batch, L + 1] with <eos> after each source.

    The end marker gives the encoder a fixed point to count back from, which is what
    reverse (and any task whose output depends on the length) needs.
    """
    padded = jnp.pad(tokens, ((0, 0), (0, 1)), constant_values=PAD_ID)
    at_end = jnp.arange(padded.shape[1])[None, :] == lengths[:, None]
    return jnp.where(at_end, EOS_ID, padded).astype(jnp.int32)


def source_lengths(src: jax.Array) -> jax.Array:
    """[batch] the number of symbols in each row of `source_array`'s output."""
    return jnp.sum((src != PAD_ID) & (src != EOS_ID), axis=1)


def decoder_arrays(
    target: jax.Array, lengths: jax.Array, tgt_len: int
) -> tuple[jax.Array, jax.Array]:
    """Target ids [batch, T] and lengths -> <bos> + target and target + <eos>, [batch, tgt_len]."""
    batch, width = target.shape
    target = jnp.pad(target, ((0, 0), (0, tgt_len - width)), constant_values=PAD_ID)
    positions = jnp.arange(tgt_len)[None, :]
    tgt_out = jnp.where(positions == lengths[:, None], EOS_ID, target)
    tgt_out = jnp.where(positions <= lengths[:, None], tgt_out, PAD_ID)
    tgt_in = jnp.concatenate([jnp.full((batch, 1), BOS_ID, target.dtype), target[:, :-1]], axis=1)
    tgt_in = jnp.where(positions <= lengths[:, None], tgt_in, PAD_ID)
    return tgt_in.astype(jnp.int32), tgt_out.astype(jnp.int32)


def draw_hints(key: jax.Array, lengths: jax.Array, width: int) -> jax.Array:
    """[batch, width] hint numbers: row b holds lengths[b] distinct numbers in increasing
    order (the rest is filler), a random subset of a random window of [0, HINTS) at least
    that long. Long inputs use most hints, close together; short ones, drawn this way,
    hold hints both far apart and side by side, so that the model learns to tell apart
    hints that only long inputs hold together (n hints in a row would never put two
    hints 17 apart into an input of 16). Hints near either end are drawn less often
    than the others, but every one is drawn."""
    span_key, offset_key, pick_key = jax.random.split(key, 3)
    span = jax.random.randint(span_key, lengths.shape, lengths, HINTS + 1)[:, None]
    offset = jax.random.randint(offset_key, lengths.shape, 0, HINTS - span[:, 0] + 1)[:, None]
    scores = jax.random.uniform(pick_key, (lengths.shape[0], HINTS))
    scores = jnp.where(jnp.arange(HINTS)[None, :] < span, scores, 2.0)  # never outside
    _, picked = jax.lax.top_k(-scores, width)  # the lowest scores: a random subset
    picked = jnp.where(columns(picked) < lengths[:, None], picked, HINTS)
    return jnp.minimum(jnp.sort(picked, axis=1) + offset, HINTS - 1).astype(jnp.int32)


def interleave(hints: jax.Array, symbols: jax.Array, lengths: jax.Array) -> jax.Array:
    """[batch, W] hints and symbols -> [batch, 2W]: hint, symbol, hint, ... for the first
    `lengths` symbols of each row, <pad> after."""
    pairs = jnp.stack([hints, symbols], axis=2).reshape(symbols.shape[0], -1)
    return jnp.where(columns(pairs) < 2 * lengths[:, None], pairs, PAD_ID)


def gather(tokens: jax.Array, index: jax.Array, length: jax.Array, fill=PAD_ID) -> jax.Array:
    """Row-wise tokens[b, index[b, i]] for i < length[b], `fill` after: [batch, width]."""
    picked = jnp.take_along_axis(tokens, jnp.clip(index, 0, tokens.shape[1] - 1), axis=1)
    return jnp.where(jnp.arange(index.shape[1])[None, :] < length[:, None], picked, fill)


def columns(tokens: jax.Array, width: int | None = None) -> jax.Array:
    """[1, width] column numbers 0, 1, ... (width defaults to the source width)."""
    return jnp.arange(tokens.shape[1] if width is None else width)[None, :]


class Copy(Task):
    name = "copy"
    description = "Repeat the input: 3141 -> 3141"

    def solve(self, text):
        return text

    def targets(self, tokens, lengths):
        return tokens, lengths

    def reads(self, steps, lengths):
        return jnp.broadcast_to(steps, (lengths.shape[0], steps.shape[1]))


class Reverse(Task):
    name = "reverse"
    level = "DCF"
    description = "Reverse the input: 3141 -> 1413"

    def solve(self, text):
        return text[::-1]

    def targets(self, tokens, lengths):
        return gather(tokens, self.reads(columns(tokens), lengths[:, None]), lengths), lengths

    def reads(self, steps, lengths):
        return lengths - 1 - steps


class Duplicate(Task):
    name = "duplicate"
    level = "CS"
    description = "Write the input twice: 314 -> 314314"

    def solve(self, text):
        return text + text

    def output_length(self, length):
        return 2 * length

    def targets(self, tokens, lengths):
        index = self.reads(columns(tokens, 2 * tokens.shape[1]), lengths[:, None])
        return gather(tokens, index, 2 * lengths), 2 * lengths

    def reads(self, steps, lengths):
        return steps % jnp.maximum(lengths, 1)


@dataclass(frozen=True)
class Shift(Task):
    """Rotate left by `shift` places (`task.shift`), wrapping around."""

    shift: int = 1
    name = "shift"
    description = "Rotate left by task.shift places: 31415 -> 14153"

    def solve(self, text):
        k = self.shift % len(text)
        return text[k:] + text[:k]

    def targets(self, tokens, lengths):
        return gather(tokens, self.reads(columns(tokens), lengths[:, None]), lengths), lengths

    def reads(self, steps, lengths):
        return (steps + self.shift) % jnp.maximum(lengths, 1)


@dataclass(frozen=True)
class OddsFirst(Task):
    """The symbols at odd positions, then those at even ones, positions counted from
    `task.count_from`: 1 as the paper's docstring counts (31415 -> 34511), 0 as the code
    its experiments ran counts (`s[1::2] + s[0::2]`: 31415 -> 11345)."""

    count_from: int = 1
    name = "odds_first"
    level = "CS"
    description = "Odd positions, then even: 31415 -> 34511"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.count_from not in (0, 1):
            raise JabError(f"task.count_from must be 0 or 1, got {self.count_from}")

    def solve(self, text):
        first = 1 - self.count_from  # the index of the first odd position
        return text[first::2] + text[1 - first :: 2]

    def targets(self, tokens, lengths):
        return gather(tokens, self.reads(columns(tokens), lengths[:, None]), lengths), lengths

    def reads(self, steps, lengths):
        first = 1 - self.count_from
        odds = (lengths + self.count_from) // 2
        return jnp.where(steps < odds, 2 * steps + first, 2 * (steps - odds) + 1 - first)


class Sort(Task):
    name = "sort"
    description = "Sort the symbols, keeping duplicates: 3141 -> 1134"

    def solve(self, text):
        return "".join(sorted(text))

    def targets(self, tokens, lengths):
        # Ids follow code-point order (see tokenizer), so sorting ids sorts characters.
        padded_last = jnp.where(tokens == PAD_ID, jnp.iinfo(jnp.int32).max, tokens)
        ordered = jnp.sort(padded_last, axis=1, stable=True)
        return jnp.where(ordered == jnp.iinfo(jnp.int32).max, PAD_ID, ordered), lengths


class BucketSort(Sort):
    name = "bucket_sort"
    level = "CS"
    description = "Sort, many duplicates: 2010210 -> 0001122"
    default_alphabet = "012"


@dataclass(frozen=True)
class Hinted(Task):
    """A task with index hints (`task.index_hints`, after Zhou et al. 2024), wrapping the
    task it hints: every source symbol is preceded by an index hint, increasing along
    the source (`draw_hints`), and every answer symbol by the hint of the source symbol
    it is. The model is not told where to read: it writes the index itself and finds it
    in the input. Only tasks whose answer symbols are input symbols (`reads`) take it.
    Everything else is the wrapped task's."""

    task: Task = field(default_factory=Copy)

    index_hints: ClassVar[bool] = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "alphabet", self.task.alphabet)
        object.__setattr__(self, "tokenizer", self.task.tokenizer)

    name = property(lambda self: self.task.name)
    label = property(lambda self: self.task.label)
    description = property(lambda self: self.task.description)
    min_length = property(lambda self: self.task.min_length)

    def solve(self, text):
        return self.task.solve(text)

    def check_input(self, text):
        self.task.check_input(text)

    def check_lengths(self, min_len, max_len):
        self.task.check_lengths(min_len, max_len)

    def output_length(self, length):
        return self.task.output_length(length)

    def targets(self, tokens, lengths):
        return self.task.targets(tokens, lengths)

    def reads(self, steps, lengths):
        return self.task.reads(steps, lengths)

    def source_tokens(self, length):
        return 2 * length

    def answer_tokens(self, length):
        return 2 * self.output_length(length)

    def symbols_in(self, tokens):
        return tokens // 2

    def symbol_counts(self, src):
        return source_lengths(src) // 2

    def model_sources(self, rows, key):
        lengths = jnp.asarray([len(row) for row in rows])
        hints = self.tokenizer.hint_start + draw_hints(key, lengths, max(map(len, rows)))
        return [
            [token for hint, i in zip(drawn, row) for token in (hint, i)]
            for drawn, row in zip(hints.tolist(), rows)
        ]

    def sample_lengths(self, key, lengths, max_len):
        """The wrapped task's sources and answers (drawn as it draws them), with index
        hints (`draw_hints`) before the source symbols; each answer symbol gets the hint
        of the source symbol it reads."""
        key, hint_key = jax.random.split(key)
        tokens, target, target_lengths = self.task.sample_symbols(key, lengths, max_len)
        hints = self.tokenizer.hint_start + draw_hints(hint_key, lengths, max_len)
        read = self.reads(columns(target), lengths[:, None])
        answer_hints = jnp.take_along_axis(hints, jnp.clip(read, 0, max_len - 1), axis=1)
        source = interleave(hints, tokens, lengths)
        answer = interleave(answer_hints, target, target_lengths)
        return assemble(source, 2 * lengths, answer, 2 * target_lengths, self.answer_width(max_len))


@dataclass(frozen=True)
class Classify(Task):
    """A task whose answer is one symbol, the class of its input (the classification
    tasks of Delétang et al. 2023, "Neural Networks and the Chomsky Hierarchy"): the decoder
    writes the class and <eos>. Subclasses say how a row of symbol values [batch, L]
    and its length map to a class (`classify`), or draw sources and their classes
    together (`sample_symbols`)."""

    classes: ClassVar[str] = "01"  # the answer symbols, class 0, 1, ...
    fixed_alphabet = True
    level = "regular"

    def output_length(self, length):
        return length * 0 + 1  # an int for an int, an array for an array

    def classify(self, values: jax.Array, valid: jax.Array) -> jax.Array:
        """[batch] classes of rows of symbol values [batch, L], `valid` where a symbol is."""
        raise NotImplementedError

    def targets(self, tokens, lengths):
        found = self.classify(*self.values(tokens, lengths))
        return self.class_ids[found][:, None], jnp.ones_like(lengths)

    def values(self, tokens: jax.Array, lengths: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Source ids [batch, L] -> each symbol's place in the alphabet (0 past the end)
        and where a symbol is, [batch, L] each."""
        values = jnp.argmax(tokens[:, :, None] == self.symbol_ids[None, None, :], axis=-1)
        valid = columns(tokens) < lengths[:, None]
        return jnp.where(valid, values, 0), valid

    @property
    def class_ids(self) -> jax.Array:
        """[classes] the token ids of the answer symbols."""
        return jnp.asarray(self.tokenizer.ids(self.classes), jnp.int32)


@dataclass(frozen=True)
class Worked(Classify):
    """A class task that can show its working (`task.scratchpad`, after the scratchpads of
    Nye et al. 2021): the answer writes, under each input symbol, where the computation
    stands after it, then the class. Each symbol of the working follows from the input
    symbol above it and the working just before it, so the task is aligned (coupled
    positions apply). The model is told the intermediate results: supervision the bare
    task does not give. Subclasses define the class of a text (`value`) and the working,
    as plain Python (`shown`) and as array code (`working`)."""

    scratchpad: bool = False

    def value(self, text: str) -> str | None:
        """The class of `text`; None when it is not a valid input."""
        raise NotImplementedError

    def shown(self, text: str) -> str:
        """The working of a valid `text`, one symbol per input symbol."""
        raise NotImplementedError

    def working(self, values: jax.Array, valid: jax.Array) -> jax.Array:
        """Rows of symbol values [batch, L] -> the class index under each symbol [batch, L]."""
        raise NotImplementedError

    def solve(self, text):
        value = self.value(text)
        return self.shown(text) + value if value is not None and self.scratchpad else value

    def output_length(self, length):
        return length + 1 if self.scratchpad else super().output_length(length)

    @property
    def aligned(self) -> bool:
        return self.scratchpad

    def alignment(self, src, width):
        """Each symbol of the working stands under its input symbol; the class after them."""
        lengths = source_lengths(src)[:, None]
        source = jnp.where(columns(src) < lengths, columns(src), UNALIGNED)
        steps = columns(src, width)
        answer = jnp.where(steps <= lengths, steps, UNALIGNED)
        return source.astype(jnp.int32), answer.astype(jnp.int32)

    def targets(self, tokens, lengths):
        if not self.scratchpad:
            return super().targets(tokens, lengths)
        values, valid = self.values(tokens, lengths)
        under = jnp.pad(self.working(values, valid), ((0, 0), (0, 1)))
        found = self.classify(values, valid)
        shown = jnp.where(columns(under) < lengths[:, None], under, found[:, None])
        return self.class_ids[shown], lengths + 1


@dataclass(frozen=True)
class ParityCheck(Worked):
    """With `task.scratchpad`, the parity so far under each symbol: 1011 -> 11011."""

    name = "parity_check"
    description = "Are there an odd number of 1s? 1011 -> 1"
    default_alphabet = "01"

    def value(self, text):
        return str(text.count("1") % 2)

    def shown(self, text):
        return "".join(str(text[: i + 1].count("1") % 2) for i in range(len(text)))

    def classify(self, values, valid):
        return jnp.sum(values * valid, axis=1) % 2

    def working(self, values, valid):
        return jnp.cumsum(values * valid, axis=1) % 2


@dataclass(frozen=True)
class EvenPairs(Worked):
    """With `task.scratchpad`, the parity of the changes so far under each symbol:
    0110 -> 01100."""

    name = "even_pairs"
    description = "Are there an odd number of 01s and 10s? 0110 -> 0"
    default_alphabet = "01"

    def value(self, text):
        return str(sum(a != b for a, b in pairwise(text)) % 2)

    def shown(self, text):
        return "".join(self.value(text[: i + 1]) for i in range(len(text)))

    def classify(self, values, valid):
        return self.working(values, valid)[:, -1]

    def working(self, values, valid):
        changes = (values[:, 1:] != values[:, :-1]) & valid[:, 1:]
        return jnp.pad(jnp.cumsum(changes, axis=1), ((0, 0), (1, 0))) % 2


@dataclass(frozen=True)
class CycleNavigation(Worked):
    """Steps around a cycle of 5 places from place 0: symbol 0 steps back, 1 stays, 2
    steps on; the answer is the place reached (as in the paper's encoding). With
    `task.scratchpad`, the place reached so far under each step: 2202 -> 12122."""

    name = "cycle_navigation"
    description = "Where on a cycle of 5 do the steps end? 2202 -> 2"
    default_alphabet = "012"
    classes = "01234"

    def value(self, text):
        return str(sum(int(step) - 1 for step in text) % 5)

    def shown(self, text):
        return "".join(self.value(text[: i + 1]) for i in range(len(text)))

    def classify(self, values, valid):
        return jnp.sum((values - 1) * valid, axis=1) % 5

    def working(self, values, valid):
        return jnp.cumsum((values - 1) * valid, axis=1) % 5


@dataclass(frozen=True)
class MissingDuplicate(Worked):
    """A binary string written twice with one symbol left out (`_`); the answer is the
    symbol left out. Odd lengths end in a filler symbol `#` (the paper's format).

    Every other symbol is written twice, so the 1s number an odd count exactly when the
    symbol left out is a 1: the answer is also the parity of the 1s. With
    `task.scratchpad`, the working is that parity so far: 0110_110 -> 01000100 then 0.
    Not the task's intended algorithm (matching each symbol with its twin), but one its
    binary alphabet admits."""

    name = "missing_duplicate"
    level = "CS"
    description = "The symbol left out of a string written twice: 0110_110 -> 0"
    default_alphabet = "01_#"
    min_length = 2

    def check_input(self, text):
        if self.value(text) is None:
            raise JabError(
                f"missing_duplicate takes a binary string written twice with one symbol "
                f"replaced by _ (and # after it when the length is odd), like 0110_110; "
                f"got {text!r}"
            )

    def value(self, text):
        body = text[:-1] if len(text) % 2 else text
        half = len(body) // 2
        if (len(text) % 2 and text[-1] != "#") or not half or body.count("_") != 1:
            return None
        first, second = body[:half], body[half:]
        if set(first + second) - set("01_"):
            return None
        if "_" in first:
            missing, other = first, second
        else:
            missing, other = second, first
        at = missing.index("_")
        if missing[:at] + missing[at + 1 :] != other[:at] + other[at + 1 :]:
            return None
        return other[at]

    def sample_symbols(self, key, lengths, max_len):
        bit_key, missing_key = jax.random.split(key)
        half = (lengths // 2)[:, None]
        bits = jax.random.randint(bit_key, (lengths.shape[0], max_len), 0, 2)
        i = columns(bits)
        values = jnp.take_along_axis(bits, i % jnp.maximum(half, 1), axis=1)
        missing = jax.random.randint(missing_key, lengths.shape, 0, 2 * half[:, 0])[:, None]
        values = jnp.where(i == missing, 2, values)  # _
        values = jnp.where(i == 2 * half, 3, values)  # # after an odd length's pairs
        tokens = jnp.where(i < lengths[:, None], self.symbol_ids[values], PAD_ID)
        return (tokens, *self.targets(tokens, lengths))

    def classify(self, values, valid):
        half = (jnp.sum(valid, axis=1) // 2)[:, None]
        missing = jnp.argmax((values == 2) & valid, axis=1)[:, None]
        other = jnp.where(missing < half, missing + half, missing - half)
        return jnp.take_along_axis(values, other, axis=1)[:, 0]

    def shown(self, text):
        return "".join(str(text[: i + 1].count("1") % 2) for i in range(len(text)))

    def working(self, values, valid):
        return jnp.cumsum((values == 1) & valid, axis=1) % 2


@dataclass(frozen=True)
class StackManipulation(Task):
    """A stack, bottom first, then actions on it (`-` pops, `a` pushes 0, `b` pushes 1;
    a pop of the empty stack does nothing); the answer is the stack at the end, top
    first. An empty stack is an empty answer: the decoder writes <eos> alone."""

    name = "stack_manipulation"
    level = "DCF"
    description = "Run a: push 0, b: push 1, -: pop on a stack; answer top first: 011b-- -> 10"
    end_scored = True  # the paper's answer ends in a marker, scored like a symbol
    default_alphabet = "01-ab"
    fixed_alphabet = True
    actions: ClassVar[str] = "-ab"

    def check_input(self, text):
        stack = text.rstrip(self.actions)
        if not stack or set(stack) - set("01"):
            raise JabError(
                "stack_manipulation takes a stack of 0s and 1s, then actions "
                f"(a: push 0, b: push 1, -: pop), like 011b--; got {text!r}"
            )

    def solve(self, text):
        stack = []
        for symbol in text:
            if symbol == "-":
                if stack:
                    stack.pop()
            else:
                stack.append({"a": "0", "b": "1"}.get(symbol, symbol))
        return "".join(reversed(stack))

    def sample_symbols(self, key, lengths, max_len):
        stack_key, bit_key, action_key = jax.random.split(key, 3)
        # The paper's draw: a stack of 1 to length - 1 symbols (1 for length 1), then actions.
        stack = jax.random.randint(stack_key, lengths.shape, 1, jnp.maximum(lengths, 2))
        bits = jax.random.randint(bit_key, (lengths.shape[0], max_len), 0, 2)
        actions = jax.random.randint(action_key, (lengths.shape[0], max_len), 2, 5)
        i = columns(bits)
        values = jnp.where(i < stack[:, None], bits, actions)  # 0, 1, then 2 -, 3 a, 4 b
        valid = i < lengths[:, None]
        tokens = jnp.where(valid, self.symbol_ids[values], PAD_ID)
        rows = jnp.arange(lengths.shape[0])

        def act(state, column):
            stack, top = state  # [batch, max_len] values and [batch] the stack's height
            value, here = column
            push = here & (value != 2)
            pop = here & (value == 2) & (top > 0)
            at = jnp.minimum(top, max_len - 1)
            pushed = jnp.where(value > 2, value - 3, value)
            stack = stack.at[rows, at].set(jnp.where(push, pushed, stack[rows, at]))
            return (stack, top + push - pop), None

        start = (jnp.zeros_like(bits), jnp.zeros_like(lengths))
        (final, height), _ = jax.lax.scan(act, start, (values.T, valid.T))
        answer = gather(final, height[:, None] - 1 - i, height)
        return tokens, jnp.where(i < height[:, None], self.symbol_ids[answer], PAD_ID), height
