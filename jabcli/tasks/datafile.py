"""Custom tasks from a file of input/output pairs: `jab train --task file:pairs.tsv`.

A `.tsv` file holds `input<TAB>output` per line, optionally under a header line
`input<TAB>output`; a `.jsonl` file holds one `{"input": ..., "output": ...}` object per
line. Lines starting with `# ` are comments in either format. Whitespace inside a string
is ignored, as everywhere in jab. A fixed share of the distinct inputs (`task.held_out`,
chosen by a seeded shuffle, so the same file always splits the same way) is kept out of
training and is what `jab eval` measures.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from jabcli.core.errors import JabError
from jabcli.core.tokenizer import PAD_ID, Tokenizer, clean
from jabcli.tasks import derived
from jabcli.tasks.batch import Batch, assemble
from jabcli.tasks.contract import Task

SPLIT_SEED = 0
COMMENT = "# "  # a line starting with it is skipped, in either format


@dataclass(frozen=True)
class DataFile:
    """The pairs of one data file, read and checked once; its alphabet and lengths are
    the config's defaults for a task on it."""

    path: str
    pairs: tuple[tuple[str, str], ...]

    @classmethod
    def read(cls, path: str, tokenizer: Tokenizer | None = None) -> DataFile:
        """The pairs of the file at `path`, each of `tokenizer`'s characters (a saved
        run's vocabulary); None: any characters (a new run's vocabulary is made from
        them, `symbols`)."""
        file = Path(path)
        if file.is_dir():
            raise JabError(f"{path} is a folder, not a data file")
        if not file.is_file():
            raise JabError(f"data file {path!r} does not exist")
        return cls(path, tuple(read_pairs(file, tokenizer)))

    @property
    def symbols(self) -> str:
        """Every character of the inputs and the outputs."""
        return "".join(sorted({c for pair in self.pairs for text in pair for c in text}))

    @property
    def alphabet(self) -> str:
        """The characters of the inputs."""
        return "".join(sorted({c for source, _ in self.pairs for c in source}))

    def defaults(self) -> dict:
        lengths = [len(source) for source, _ in self.pairs]
        return {"min_len": min(lengths), "max_len": max(lengths), "alphabet": self.alphabet}


@dataclass(frozen=True, eq=False)
class FileTask(Task):
    """Pairs read from a file; sources [N, S] and targets [N, T] are padded id arrays."""

    generated: ClassVar[bool] = False  # held-out rows are chosen on the host

    data: DataFile = field(kw_only=True)  # required; keyword-only, after Task's defaults
    held_out: float = 0.1  # share of distinct inputs kept for evaluation
    trained: tuple[int, int] | None = None  # the input lengths training draws from
    answers: dict[str, str] = field(init=False)
    inputs: np.ndarray = field(init=False)  # [N, S] source ids, <pad>-filled
    outputs: np.ndarray = field(init=False)  # [N, T] target ids, <pad>-filled
    input_lengths: np.ndarray = field(init=False)  # [N]
    output_lengths: np.ndarray = field(init=False)  # [N]
    is_held_out: np.ndarray = field(init=False)  # [N] bool
    ratio: Fraction = field(init=False)  # the largest output/input length ratio
    name = "file"
    description = "Input/output pairs from a file"
    fixed_alphabet = True

    def __post_init__(self) -> None:
        pairs = self.data.pairs
        inputs = sorted({source for source, _ in pairs})
        if len(inputs) < 2:
            raise JabError(f"{self.path} needs at least 2 different inputs (one to hold out)")
        shuffled = np.random.default_rng(SPLIT_SEED).permutation(len(inputs))
        count = min(len(inputs) - 1, max(1, round(self.held_out * len(inputs))))
        kept_out = {inputs[i] for i in shuffled[:count]}  # both splits non-empty
        src = np.full((len(pairs), max(len(s) for s, _ in pairs)), PAD_ID, np.int32)
        tgt = np.full((len(pairs), max(len(t) for _, t in pairs)), PAD_ID, np.int32)
        for i, (source, target) in enumerate(pairs):
            src[i, : len(source)] = self.tokenizer.ids(source)
            tgt[i, : len(target)] = self.tokenizer.ids(target)
        derived = {
            "alphabet": self.alphabet or self.data.alphabet,
            "answers": dict(pairs),
            "inputs": src,
            "outputs": tgt,
            "input_lengths": np.array([len(s) for s, _ in pairs], np.int32),
            "output_lengths": np.array([len(t) for _, t in pairs], np.int32),
            "is_held_out": np.array([s in kept_out for s, _ in pairs]),
            "ratio": max(Fraction(len(t), len(s)) for s, t in pairs),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    @property
    def path(self) -> str:
        return self.data.path

    @property
    def label(self) -> str:
        return f"file:{self.path}"

    def solve(self, text):
        return self.answers.get(text)

    def output_length(self, length):
        # Room for unseen longer inputs too, at the data's largest output/input ratio.
        return -(-length * self.ratio.numerator // self.ratio.denominator)

    def rows(self, min_len: int, max_len: int, held_out: bool) -> np.ndarray:
        """Indices of the pairs of one split with input lengths in [min_len, max_len]. The
        held-out side is every pair never trained on: the held-out split, and the pairs
        longer or shorter than the `trained` lengths."""
        in_range = (self.input_lengths >= min_len) & (self.input_lengths <= max_len)
        unseen = self.is_held_out
        if self.trained is not None:
            low, high = self.trained
            unseen = unseen | (self.input_lengths < low) | (self.input_lengths > high)
        return np.flatnonzero(in_range & (unseen if held_out else ~self.is_held_out))

    @property
    def longest(self) -> int:
        return int(self.input_lengths.max())

    def check_lengths(self, min_len: int, max_len: int) -> None:
        """Both splits must hold pairs with input lengths in [min_len, max_len]."""
        for held_out, split in ((False, "training"), (True, "held-out")):
            if not len(self.rows(min_len, max_len, held_out)):
                raise JabError(
                    f"{self.path} has no {split} pairs with input lengths {min_len}-{max_len}"
                )

    def sample(self, key: jax.Array, batch_size: int, min_len: int, max_len: int) -> Batch:
        """`batch_size` training pairs, drawn with replacement."""
        rows = jnp.asarray(self.rows(min_len, max_len, held_out=False))
        return self.pairs(rows[jax.random.randint(key, (batch_size,), 0, len(rows))], max_len)

    def held_out_batch(
        self,
        key: jax.Array,
        samples: int,
        min_len: int,
        max_len: int,
        each_length: bool = False,
    ) -> Batch:
        """Up to `samples` distinct held-out pairs (all of them when there are fewer), or
        up to `samples` at each length; lengths the split lacks are left out."""
        spans = (
            [(n, n) for n in range(min_len, max_len + 1)] if each_length else [(min_len, max_len)]
        )
        chosen = []
        for i, (low, high) in enumerate(spans):
            rows = self.rows(low, high, held_out=True)
            if len(rows) > samples:
                rows = np.asarray(
                    jax.random.choice(jax.random.fold_in(key, i), rows, (samples,), replace=False)
                )
            chosen.append(rows)
        return self.pairs(jnp.asarray(np.concatenate(chosen), jnp.int32), max_len)

    def pairs(self, rows: jax.Array, max_len: int) -> Batch:
        """The pairs at `rows`, padded to sources of `max_len` symbols."""
        tgt_len = self.output_length(max_len)
        return assemble(
            jnp.asarray(pad_to(self.inputs, max_len))[rows],
            jnp.asarray(self.input_lengths)[rows],
            jnp.asarray(pad_to(self.outputs, tgt_len))[rows],
            jnp.asarray(self.output_lengths)[rows],
            derived.answer_width(self, max_len),
        )


def pad_to(ids: np.ndarray, width: int) -> np.ndarray:
    return np.pad(ids, ((0, 0), (0, max(0, width - ids.shape[1]))))[:, :width]


def read_pairs(path: Path, tokenizer: Tokenizer | None) -> list[tuple[str, str]]:
    """(input, output) pairs, with a one-line error naming the first bad line."""
    if path.suffix.lower() not in (".tsv", ".jsonl"):
        raise JabError(f"data file {str(path)!r} must end in .tsv or .jsonl")
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError:
        raise JabError(f"{path} is not a UTF-8 text file") from None
    except OSError as err:
        raise JabError(f"could not read {path}: {err.strerror}") from None
    numbered = [
        (number, line)
        for number, line in enumerate(lines, 1)
        if line.strip() and not line.startswith(COMMENT)
    ]
    if numbered and path.suffix.lower() == ".tsv" and is_header(numbered[0][1]):
        numbered = numbered[1:]  # the columns' names, not a pair
    pairs: dict[str, str] = {}
    for number, line in numbered:
        where = f"{path} line {number}"
        source, target = parse_line(line, path.suffix.lower(), where)
        source, target = clean(source), clean(target)
        if not source or not target:
            raise JabError(f"{where}: input and output must not be empty")
        vocabulary = "".join(tokenizer.tokens[3:]) if tokenizer is not None else ""
        unknown = sorted(set(source + target) - set(vocabulary)) if vocabulary else []
        if unknown:
            raise JabError(
                f"{where}: characters {''.join(unknown)!r} are not in jab's vocabulary "
                f"{vocabulary!r}"
            )
        if pairs.get(source, target) != target:
            raise JabError(f"{where}: input {source!r} appears earlier with another output")
        pairs[source] = target
    if not pairs:
        raise JabError(f"{path} holds no input/output pairs")
    return list(pairs.items())


def is_header(line: str) -> bool:
    """Whether a TSV line is the column header `input<TAB>output` (any case)."""
    return [f.strip().lower() for f in line.split("\t")] == ["input", "output"]


def parse_line(line: str, suffix: str, where: str) -> tuple[str, str]:
    if suffix == ".tsv":
        fields = line.split("\t")
        if len(fields) != 2:
            got = "1 field" if len(fields) == 1 else f"{len(fields)} fields"
            raise JabError(f"{where}: expected input<TAB>output, got {got}")
        return fields[0], fields[1]
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        raise JabError(f"{where}: not valid JSON") from None
    if not (
        isinstance(record, dict)
        and isinstance(record.get("input"), str)
        and isinstance(record.get("output"), str)
    ):
        raise JabError(f'{where}: expected {{"input": "...", "output": "..."}}')
    return record["input"], record["output"]
