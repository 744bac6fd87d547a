"""The built-in toy tasks: one small class each, one registry.

A task turns a batch of random source sequences into their targets with array
operations (no per-example Python loop), so batches are drawn on the device inside
the jitted train step. `solve` is the plain-Python reference the samplers are tested
against and `jab predict` marks answers with.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import ClassVar, NamedTuple

from jabcli.errors import JabError, suggest
from jabcli.runtime import Lazy
from jabcli.tokenizer import BOS_ID, EOS_ID, HINTS, PAD_ID, Tokenizer

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


class OddsFirst(Task):
    name = "odds_first"
    level = "CS"
    description = "Odd positions, then even: 31415 -> 34511"

    def solve(self, text):
        return text[0::2] + text[1::2]

    def targets(self, tokens, lengths):
        return gather(tokens, self.reads(columns(tokens), lengths[:, None]), lengths), lengths

    def reads(self, steps, lengths):
        odds = (lengths + 1) // 2
        return jnp.where(steps < odds, 2 * steps, 2 * (steps - odds) + 1)


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
class Addition(Task):
    """Decimal a+b; with `task.reverse_answer` the sum is written least significant digit first.

    A source of length L is a+b with len(a) + len(b) = L - 1, so L >= 3. Numbers have
    no leading zeros.
    """

    reverse_answer: bool = False
    name = "addition"
    description = "Add two numbers: 57+68 -> 125"
    default_alphabet = "+0123456789"
    fixed_alphabet = True
    min_length = 3

    def check_input(self, text):
        a, plus, b = text.partition("+")
        if not (plus and a.isdigit() and b.isdigit()):
            raise JabError(f"addition takes inputs like 57+68, got {text!r}")

    def solve(self, text):
        a, _, b = text.partition("+")
        total = str(int(a) + int(b))
        return total[::-1] if self.reverse_answer else total

    def output_length(self, length):
        return length - 1  # the sum has at most one digit more than the longer term

    def sample_lengths(self, key, lengths, max_len):
        plus_id = self.tokenizer.ids("+")[0]
        digit_ids = jnp.asarray(self.tokenizer.ids("0123456789"), jnp.int32)
        split_key, a_key, b_key = jax.random.split(key, 3)
        a_len = jax.random.randint(split_key, lengths.shape, 1, lengths - 1)
        b_len = lengths - 1 - a_len
        a_digits = random_number(a_key, a_len, max_len)
        b_digits = random_number(b_key, b_len, max_len)
        i = columns(a_digits)
        b_here = jnp.take_along_axis(b_digits, jnp.clip(i - a_len[:, None] - 1, 0, None), axis=1)
        digits = jnp.where(i < a_len[:, None], a_digits, b_here)
        tokens = jnp.where(i == a_len[:, None], plus_id, digit_ids[digits])
        tokens = jnp.where(i < lengths[:, None], tokens, PAD_ID)
        # Add least significant digit first, carrying along the row.
        a_low = gather(a_digits, a_len[:, None] - 1 - i, a_len, fill=0)
        b_low = gather(b_digits, b_len[:, None] - 1 - i, b_len, fill=0)

        def add(carry, columns):
            total = columns[0] + columns[1] + carry
            return total // 10, total % 10

        _, sum_low = jax.lax.scan(add, jnp.zeros_like(lengths), (a_low.T, b_low.T))
        sum_low = sum_low.T  # [batch, max_len], least significant first
        sum_len = jnp.maximum(1, jnp.max(jnp.where(sum_low > 0, i + 1, 0), axis=1))
        order = i if self.reverse_answer else sum_len[:, None] - 1 - i
        answer = gather(digit_ids[sum_low], order, sum_len)[:, : self.output_length(max_len)]
        return assemble(tokens, lengths, answer, sum_len, self.answer_width(max_len))

    def alignment(self, src, width):
        """Digit k of each term (k = 0 least significant) and of the sum share index k.
        Least significant first, answer step t writes digit t (and step m + 1, past the
        longer term's m digits, the <eos> after a carry). Most significant first, the
        sum has m or m + 1 digits, which the input alone does not tell: step t is given
        index m - t, the digit it writes when the sum has m + 1 digits."""
        plus_id = self.tokenizer.ids("+")[0]
        i = columns(src)
        lengths = source_lengths(src)[:, None]
        a_len = jnp.argmax(src == plus_id, axis=1)[:, None]
        significance = jnp.where(i < a_len, a_len - 1 - i, lengths - 1 - i)
        digit = (i < lengths) & (i != a_len)
        source = jnp.where(digit, significance, UNALIGNED)
        longer = jnp.maximum(a_len, lengths - 1 - a_len)
        steps = columns(src, width)
        index = steps if self.reverse_answer else longer - steps
        answer = jnp.where(steps <= longer + 1, index, UNALIGNED)
        return source.astype(jnp.int32), answer.astype(jnp.int32)


def random_number(key: jax.Array, lengths: jax.Array, width: int) -> jax.Array:
    """Digit values [batch, width], most significant first, no leading zero; 0 past `lengths`."""
    digits = jax.random.randint(key, (lengths.shape[0], width), 0, 10)
    lead = jax.random.randint(jax.random.fold_in(key, 1), (lengths.shape[0],), 1, 10)
    digits = digits.at[:, 0].set(jnp.where(lengths > 1, lead, digits[:, 0]))
    return jnp.where(columns(digits) < lengths[:, None], digits, 0)


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
    """A task whose answer is one symbol, the class of its input (the regular tasks of
    Delétang et al. 2023, "Neural Networks and the Chomsky Hierarchy"): the decoder
    writes the class and <eos>. Subclasses say how a row of symbol values [batch, L]
    and its length map to a class (`classify`)."""

    classes: ClassVar[str] = "01"  # the answer symbols, class 0, 1, ...
    fixed_alphabet = True
    level = "regular"

    def output_length(self, length):
        return length * 0 + 1  # an int for an int, an array for an array

    def classify(self, values: jax.Array, valid: jax.Array) -> jax.Array:
        """[batch] classes of rows of symbol values [batch, L], `valid` where a symbol is."""
        raise NotImplementedError

    def solve(self, text):
        values = jnp.asarray([[self.alphabet.index(c) for c in text]])
        return self.classes[int(self.classify(values, values >= 0)[0])]

    def targets(self, tokens, lengths):
        values = jnp.argmax(tokens[:, :, None] == self.symbol_ids[None, None, :], axis=-1)
        valid = columns(tokens) < lengths[:, None]
        found = self.classify(jnp.where(valid, values, 0), valid)
        class_ids = jnp.asarray(self.tokenizer.ids(self.classes), jnp.int32)
        return class_ids[found][:, None], jnp.ones_like(lengths)


@dataclass(frozen=True)
class ParityCheck(Classify):
    name = "parity_check"
    description = "Are there an odd number of 1s? 1011 -> 1"
    default_alphabet = "01"

    def classify(self, values, valid):
        return jnp.sum(values * valid, axis=1) % 2


@dataclass(frozen=True)
class EvenPairs(Classify):
    name = "even_pairs"
    description = "Are there an odd number of 01s and 10s? 0110 -> 0"
    default_alphabet = "01"

    def classify(self, values, valid):
        changes = (values[:, 1:] != values[:, :-1]) & valid[:, 1:]
        return jnp.sum(changes, axis=1) % 2


@dataclass(frozen=True)
class CycleNavigation(Classify):
    """Steps around a cycle of 5 places from place 0: symbol 0 steps back, 1 stays, 2
    steps on; the answer is the place reached (as in the paper's encoding)."""

    name = "cycle_navigation"
    description = "Where on a cycle of 5 do the steps end? 2202 -> 2"
    default_alphabet = "012"
    classes = "01234"

    def classify(self, values, valid):
        return jnp.sum((values - 1) * valid, axis=1) % 5


TASKS: dict[str, type[Task]] = {
    task.name: task
    for task in (
        Copy, Reverse, Duplicate, Shift, OddsFirst, Sort, BucketSort, Addition,
        ParityCheck, EvenPairs, CycleNavigation,
    )
}  # fmt: skip


def task_class(name: str) -> type[Task]:
    """The built-in task called `name`, or an error listing them all."""
    if name not in TASKS:
        raise JabError(
            f"unknown task {name!r}{suggest(name, TASKS)}; valid tasks: {', '.join(TASKS)}, "
            "or file:PATH for your own data"
        )
    return TASKS[name]
