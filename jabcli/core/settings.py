"""The config keys, each declared once.

A key is a field of one of the section dataclasses below (`task.*`, `model.*`, `train.*`):
its type is the annotation, its default the field's, and `setting` gives the rest (the
values allowed, its line in docs/configuration.md, what a study compares). The checks of
a single value (config.py), the reference table (`reference_table`) and a study's specs
(studies.py) read this declaration; a new key is one field here, and its use.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

MAX_POSITIONS = 4096  # the most model.max_positions may be: the tables are compiled in
MAX_SHIFT = 1_000_000
STEPS_MAX = 10**9  # train.steps: more would take years, and overflow the step counter
FILE_PREFIX = "file:"  # task.name file:PATH names a data file of pairs


@dataclass(frozen=True)
class Setting:
    """What is declared of a key beside its type and default. Bounds are checked as
    given (`above=0`: positive; `at_least=0, below=1`: in [0, 1)); cross-key checks are
    config.validate's code."""

    help: str = ""  # what it means: its line in docs/configuration.md
    above: float | None = None
    at_least: float | None = None
    below: float | None = None
    at_most: float | None = None
    choices: tuple[str, ...] = ()
    # Also takes a class in the user's code (PATH.py:Class, package.module:Class), which
    # the choices let through.
    code: bool = False
    every_task: bool = False  # task.*: every task takes it, not one task's own option
    results: bool = True  # False: decides no result; a study's specs leave it out


def setting(default: Any, help: str, **declared: Any) -> Any:
    """A key's dataclass field: its default and its `Setting`."""
    return field(default=default, metadata={"setting": Setting(help, **declared)})


def data_path(task_name: str) -> str | None:
    """The data file a `file:PATH` task name names, or None for a built-in task."""
    return task_name[len(FILE_PREFIX) :] if task_name.startswith(FILE_PREFIX) else None


def is_code(task: str) -> bool:
    """Whether a value (task.name, a positional encoding) names a class in the user's own
    code: PATH.py:Class or package.module:Class (tasks/user_code.py)."""
    return data_path(task) is None and ":" in task


def short_name(task: str) -> str:
    """How headings, tables and new run folders name a task or a positional scheme: a
    class in the user's code by its class (ends.py:Ends -> Ends), read from the name alone
    (no code is loaded for it); any other by its name."""
    return task.rpartition(":")[2] if is_code(task) else task


@dataclass
class TaskConfig:
    name: str = setting(
        "reverse",
        "which task (`jab tasks`), or `PATH.py:Class` for [your own](own-task.md)",
        code=True,
        every_task=True,
    )
    min_len: int = setting(
        1,
        "the shortest source; lengths are drawn uniformly from `min_len` to `max_len`",
        above=0,
        every_task=True,
    )
    max_len: int = setting(16, "the longest source (at least `min_len`)", above=0, every_task=True)
    alphabet: str = setting(
        "",
        'symbols the sources are drawn from (`""`: the task\'s own, `0123456789` for reverse; '
        "fixed for addition and file tasks)",
        every_task=True,
    )
    shift: int = setting(
        1, "shift only: places to rotate left", at_least=-MAX_SHIFT, at_most=MAX_SHIFT
    )
    reverse_answer: bool = setting(
        False,
        "addition only: write the sum least significant digit first",
    )
    index_hints: bool = setting(
        False,
        "copy, reverse, duplicate, shift, odds_first: an index hint before every symbol, "
        "which the answer writes too ([Tasks](tasks.md)); not with `coupled`",
        every_task=True,
    )
    modulus: int = setting(
        5,
        "modular_arithmetic, modular_arithmetic_brackets, solve_equation: residues 0 to "
        "modulus - 1 (2-10, a digit each)",
    )
    mult: bool = setting(
        False,
        "modular_arithmetic_brackets only: draw `*` among the operators, as the paper's "
        "experiments did ([Tasks](tasks.md#where-jabs-encoding-differs-from-the-papers))",
    )
    count_from: int = setting(
        1,
        "odds_first only: count positions from 1 (`11100 -> 11010`, the paper's docstring) or"
        " 0 (`11100 -> 10110`, the code its experiments ran)",
    )
    scratchpad: bool = setting(
        False,
        "parity_check, even_pairs, cycle_navigation, modular_arithmetic, missing_duplicate, "
        "modular_arithmetic_brackets and solve_equation: the answer shows its working, one "
        "symbol under each input symbol, then the class (`1+2*3 -> 112112`); an aligned task,"
        " so coupled positions apply ([Tasks](tasks.md#scratchpads))",
    )
    held_out: float = setting(
        0.1, "file tasks only: share of the distinct inputs kept out of training", above=0, below=1
    )
    own: dict[str, Any] = field(
        default_factory=dict,
        metadata={
            "setting": Setting(
                "a task of your own: its own options (its dataclass fields), each set as "
                "`task.<field>` ([your own task](own-task.md#its-own-options))",
                every_task=True,
            )
        },
    )


@dataclass
class ModelConfig:
    d_model: int = setting(64, "width of embeddings and residual stream", above=0)
    num_heads: int = setting(
        4,
        "attention heads; must divide `d_model` (the Transformer forms; the recurrent ones "
        "ignore it)",
        above=0,
    )
    num_layers: int = setting(
        2,
        "layers in the encoder and in the decoder (`model.arch=encoder`: in the encoder; "
        "`decoder`: in the decoder)",
        above=0,
    )
    loops: int = setting(
        1,
        "passes through each side's layers, the same weights every pass (a Universal "
        "Transformer, Dehghani et al. 2019): deeper, no more parameters; each decoding pass "
        "keeps its own cache; the passes are a loop, so more of them take no longer to "
        "compile",
        above=0,
    )
    d_ff: int = setting(256, "hidden width of the feed-forward blocks", above=0)
    dropout: float = setting(
        0.0,
        "dropout after embeddings and on each sublayer output (0.0: these tasks have no noise"
        " to overfit)",
        at_least=0,
        below=1,
    )
    norm: str = setting(
        "post", "`post` (as in the paper) or `pre` LayerNorm", choices=("post", "pre")
    )
    activation: str = setting("relu", "`relu` or `gelu`", choices=("relu", "gelu"))
    pos_encoding: str = setting(
        "sinusoidal",
        "`sinusoidal`, `learned`, `rope`, `alibi`, `randomized`, `distance`, `none`, "
        "`coupled` or `coupled_sinusoidal` ([below](positional-encodings.md)), or "
        "`PATH.py:Class` for [your own](own-positional-encoding.md), for both encoder and "
        "decoder",
        code=True,
    )
    src_pos_encoding: str = setting(
        "", 'the encoder\'s own encoding, if it differs (`""`: `pos_encoding`)', code=True
    )
    tgt_pos_encoding: str = setting(
        "", 'the decoder\'s own encoding, if it differs (`""`: `pos_encoding`)', code=True
    )
    max_positions: int = setting(
        1024,
        "longest sequence the model takes (source + `<eos>`, or answer + `<eos>`, hints "
        "counted; 2 more with `coupled`, 18 with `coupled_sinusoidal`; with "
        "`model.arch=encoder`, source + `<eos>` + answer slots; with `model.arch=decoder`, "
        "source + `<eos>` + answer + `<eos>`, except with coupled positions, which number "
        "both sides alike; the recurrent forms read no positions and take any length); longer"
        " inputs are an error. Also the size of the `learned` table and the range "
        "`randomized` and the coupled positions are drawn from",
        above=0,
        at_most=MAX_POSITIONS,
    )
    arch: str = setting(
        "encoder_decoder",
        '`encoder_decoder` (the Transformer of "Attention Is All You Need", answering token '
        "by token) or `encoder`: the paper's Transformer of the [Chomsky-hierarchy "
        "benchmark](benchmark.md#the-papers-transformer), an encoder alone that reads the "
        "input followed by one empty slot per answer token and answers every token at once; "
        "one positional encoding (not `coupled`, `coupled_sinusoidal` or `tgt_pos_encoding`),"
        " never packed; or `decoder`: a [decoder-only "
        "Transformer](models.md#the-decoder-only-transformer), the input then the answer in "
        "one causal sequence, answering token by token; one positional encoding over the "
        "whole sequence, or `coupled`/`coupled_sinusoidal` (not different `src_pos_encoding` "
        "and `tgt_pos_encoding`), packed. Or the paper's [recurrent baselines](recurrent.md),"
        " which read as the encoder form does: `lstm`, `stack_rnn` or `tape_rnn`, no "
        "positional encoding (the default one is left unused), never packed; the Transformer "
        "options (`num_heads`, `num_layers`, `loops`, `d_ff`, `norm`, `activation`, "
        "`dropout`) are ignored and `d_model` is the hidden size; or `PATH.py:Class` for "
        "[your own](own-model-form.md)",
        code=True,
    )
    memory_size: int = setting(
        0,
        "`stack_rnn` and `tape_rnn` only: cells of the stack or the tape (0: the paper's, 30 "
        "for the stack and 40 for the tape; else at least 2) ([Recurrent "
        "baselines](recurrent.md))",
        at_least=0,
    )
    memory_cell_size: int = setting(
        8, "`stack_rnn` and `tape_rnn` only: numbers each cell holds (the paper's 8)", above=0
    )
    memory_grows: bool = setting(
        False,
        "`stack_rnn` and `tape_rnn` only: a cell for every token of the sequence the model "
        "reads (its input, `<eos>` and answer slots), so that the memory holds any input at "
        "any length and training on short inputs pays for short memories; the tape is then a "
        "ring of each row's own tokens ([Recurrent "
        "baselines](recurrent.md#a-memory-that-grows-with-the-input)). `model.memory_size` "
        "stays 0",
    )
    answer_embedding: bool = setting(
        False,
        "`decoder` only: a learned vector added to every answer token's embedding, so that "
        "the model tells the answer from the input by what a token carries, not by where it "
        "is ([Models](models.md#the-answers-own-vector))",
    )
    # The paper's Transformer (Delétang et al. 2023) as its code builds it, one difference
    # a key, each for model.arch=encoder alone (docs/models.md#the-papers-transformer).
    embedding_init: float = setting(
        0.0,
        "`encoder` only: the spread of the token embedding's initial values (0: 1/sqrt(`d_model`),"
        " so that tokens weigh about as much as sinusoidal positions; the paper's code: 0.02, "
        "tokens six times weaker)",
        at_least=0,
    )
    answer_slots: str = setting(
        "eos",
        "`encoder` only: `eos`, the input then `<eos>`, one slot per answer symbol and one "
        "more, where the model writes `<eos>`; or `exact`, the paper's: no `<eos>` after the "
        "input and exactly as many slots as the longest answer has symbols, the answer ending "
        "where its slots end (the tasks whose answers vary in length still write `<eos>`, the "
        "paper's end marker)",
        choices=("eos", "exact"),
    )
    count_positions: str = setting(
        "up",
        "`encoder` only: `up`, the sequence at positions 0, 1, 2, ...; or `down`, the paper's: "
        "from the sequence's length down to 1 (its last slot at 1), sinusoidal vectors laid out"
        " as `[sin | cos]` halves; not with `randomized`",
        choices=("up", "down"),
    )
    attention_bias: bool = setting(
        True,
        "`encoder` only: biases in the attention's query, key, value and output projections "
        "(the paper's code has none)",
    )
    outputs: str = setting(
        "vocabulary",
        "`encoder` only: `vocabulary`, every slot chooses among the whole vocabulary; or "
        "`classes`, the paper's: among the task's own answer symbols (and `<eos>` where it is "
        "written), in training's loss as in every answer",
        choices=("vocabulary", "classes"),
    )

    @property
    def positions(self) -> str:
        """The positional encoding in a word, or `encoder/decoder` when the sides differ."""
        src = short_name(self.src_pos_encoding or self.pos_encoding)
        tgt = short_name(self.tgt_pos_encoding or self.pos_encoding)
        return src if src == tgt else f"{src}/{tgt}"


@dataclass
class TrainConfig:
    batch_size: int = setting(64, "examples per step (even, when packed)", above=0)
    pack: bool = setting(
        True,
        "two examples per row of the batch ([Packing](performance.md#packing)); built-in "
        "tasks only, a `file:` task is never packed",
    )
    steps: int = setting(2000, "most steps to run", above=0, at_most=STEPS_MAX)
    learning_rate: float = setting(
        0.003,
        "AdamW peak learning rate (linear warmup, then a cosine decay to `final_lr_fraction` "
        "of it at `train.steps`)",
        above=0,
    )
    warmup_steps: int = setting(200, "warmup length", at_least=0)
    final_lr_fraction: float = setting(
        0.1,
        "the learning rate at the last step, as a fraction of the peak: 1 keeps it constant "
        "after warmup, 0 decays it to nothing",
        at_least=0,
        at_most=1,
    )
    weight_decay: float = setting(0.01, "AdamW weight decay", at_least=0)
    adam_b2: float = setting(
        0.98,
        "AdamW's decay of its second moments (optax's and PyTorch's default is 0.999)",
        at_least=0,
        below=1,
    )
    lengths: str = setting(
        "per_row",
        "`per_row`: each example of a batch draws its own length from `task.min_len` to "
        "`task.max_len`; `per_batch`, the paper's: one length for the whole batch, drawn so "
        "(never packed: set `train.pack=false` for a form that packs)",
        choices=("per_row", "per_batch"),
    )
    loss_average: str = setting(
        "tokens",
        "`tokens`: the loss is the mean over every answer token of the batch (longer answers "
        "weigh more); `examples`, the paper's: each example's mean over its answer, then the "
        "mean over examples (never packed)",
        choices=("tokens", "examples"),
    )
    clip_norm: float = setting(1.0, "global gradient-norm clipping (0 turns it off)", at_least=0)
    seed: int = setting(
        0, "seeds parameters, batches and dropout (the first seed of a group)", at_least=0
    )
    seeds: int = setting(
        1,
        "models trained side by side, seeds `seed`..`seed+seeds-1` "
        "([Seeds](seeds-and-studies.md#seeds))",
        above=0,
    )
    log_every: int = setting(50, "steps per jitted chunk; one `metrics.jsonl` line each", above=0)
    eval_every: int = setting(
        200,
        "steps between held-out evaluations and checkpoints (rounded up to whole chunks)",
        above=0,
    )
    eval_samples: int = setting(512, "held-out sequences per evaluation", above=0)
    target_seq_acc: float = setting(
        0.995, "stop once held-out exact match reaches this", above=0, at_most=1
    )
    keep_checkpoints: int = setting(
        3, "newest checkpoints kept (the best one is always kept too)", above=0
    )
    log_to: str = setting(
        "",
        "also log to `tensorboard`, `wandb` or `tensorboard,wandb` ([Logging](logging.md))",
        results=False,
    )

    @property
    def group(self) -> list[int]:
        """The seeds trained side by side: `seed` and the `seeds - 1` after it."""
        return list(range(self.seed, self.seed + self.seeds))


@dataclass
class Config:
    task: TaskConfig = field(default_factory=TaskConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


SECTIONS = {"task": TaskConfig, "model": ModelConfig, "train": TrainConfig}


def keys() -> dict[str, Setting]:
    """Every key's declaration by its dotted name (`model.d_model`), section by section (a
    field declared without `setting` has the plain `Setting()`)."""
    return {
        f"{section}.{f.name}": f.metadata.get("setting", Setting())
        for section, cls in SECTIONS.items()
        for f in dataclasses.fields(cls)
    }


def keys_of(section: str) -> set[str]:
    """The names of a section's declared keys (`task`: name, min_len, ...)."""
    return {f.name for f in dataclasses.fields(SECTIONS[section])}


def reference_table() -> str:
    """docs/configuration.md's table of every key (tests/test_docs.py checks that the page
    holds it; JAB_PIN=write there writes it)."""
    defaults = Config().to_dict()
    rows = [
        f"| `{key}` | {shown(defaults[section][name])} | {declared.help} |"
        for key, declared in keys().items()
        for section, _, name in [key.partition(".")]
    ]
    return "\n".join(["| key | default (reverse preset) | meaning |", "|---|---|---|", *rows])


def shown(default: Any) -> str:
    """A default as the table shows it: as YAML writes it, `""` for the empty text."""
    if isinstance(default, bool):
        return str(default).lower()
    return '`""`' if default == "" else str(default)
