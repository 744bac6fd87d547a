"""Run configuration: the defaults, YAML files and `--set key=value` overrides.

This module knows the keys, their types and the checks that need nothing but the
config itself. What a config means (which task, which positional scheme) and the
checks that need those is `experiment.py`'s job. Presets (`tasks/NAME.yaml`) hold
only what differs from the defaults below.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from jabcli.core.errors import JabError, suggest

# What a run's config.yaml holds beside its config: given to --config (to train a new run
# like a saved one), they are skipped; the new run has today's vocabulary.
RUN_RECORD_KEYS = ("format", "created", "vocab")
FILE_PREFIX = "file:"  # task.name file:PATH names a data file of pairs


SAMPLES = 1000  # held-out inputs `jab eval` decodes by default
SAMPLES_PER_LENGTH = 200  # ... and per length, with --lengths (and `jab compare`)


@dataclass
class TaskConfig:
    name: str = "reverse"
    min_len: int = 1
    max_len: int = 16
    alphabet: str = ""  # "" means the task's own alphabet
    shift: int = 1  # shift: how far to rotate
    reverse_answer: bool = False  # addition: write the sum least significant digit first
    index_hints: bool = False  # tasks that move symbols: an index before every symbol
    modulus: int = 5  # modular_arithmetic(_brackets), solve_equation: residues 0 .. modulus - 1
    mult: bool = False  # modular_arithmetic_brackets: * among the operators, as the paper ran it
    count_from: int = 1  # odds_first: 1 counts positions as the paper's docstring, 0 as its code
    scratchpad: bool = False  # class tasks (tasks.Worked): the working shown, then the class
    held_out: float = 0.1  # file:PATH tasks: share of distinct inputs kept for evaluation


@dataclass
class ModelConfig:
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2
    loops: int = 1  # each side's layers run this many times over, sharing their weights
    d_ff: int = 256
    dropout: float = 0.0
    norm: str = "post"
    activation: str = "relu"
    pos_encoding: str = "sinusoidal"  # both sides, unless one of the two below is set
    src_pos_encoding: str = ""  # the encoder's ("" means pos_encoding)
    tgt_pos_encoding: str = ""  # the decoder's ("" means pos_encoding)
    max_positions: int = 1024  # longest sequence (source + <eos>, or target + <eos>) it takes
    arch: str = "encoder_decoder"  # the model form (model/registry.py: FORMS)
    memory_size: int = 0  # stack_rnn, tape_rnn: cells of the stack or tape (0: the paper's)
    memory_cell_size: int = 8  # stack_rnn, tape_rnn: numbers a cell holds (the paper's 8)
    memory_grows: bool = False  # stack_rnn, tape_rnn: a cell per step of the sequence read
    answer_embedding: bool = False  # decoder: a learned vector added to every answer token

    @property
    def positions(self) -> str:
        """The positional encoding in a word, or `encoder/decoder` when the sides differ."""
        src = short_name(self.src_pos_encoding or self.pos_encoding)
        tgt = short_name(self.tgt_pos_encoding or self.pos_encoding)
        return src if src == tgt else f"{src}/{tgt}"


@dataclass
class TrainConfig:
    batch_size: int = 64  # examples per step
    pack: bool = True  # two examples per row of the batch (generated tasks; packing.py)
    steps: int = 2000
    learning_rate: float = 3e-3
    warmup_steps: int = 200
    final_lr_fraction: float = 0.1  # the learning rate at the last step, over learning_rate
    weight_decay: float = 0.01
    adam_b2: float = 0.98  # AdamW's second-moment decay
    clip_norm: float = 1.0
    seed: int = 0
    seeds: int = 1  # models trained side by side, with seeds seed .. seed + seeds - 1
    log_every: int = 50
    eval_every: int = 200
    eval_samples: int = 512
    target_seq_acc: float = 0.995
    keep_checkpoints: int = 3
    log_to: str = ""  # also log to "tensorboard", "wandb" or "tensorboard,wandb" (loggers.py)

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
CHOICES = {
    "model.norm": ("post", "pre"),
    "model.activation": ("relu", "gelu"),
}
LOGGERS = ("tensorboard", "wandb")  # train.log_to's choices, comma-separated
MAX_POSITIONS = 4096  # the most model.max_positions may be: the tables are compiled in
MAX_SHIFT = 1_000_000
STEPS_MAX = 10**9  # train.steps: more would take years, and overflow the step counter


def data_path(task_name: str) -> str | None:
    """The data file a `file:PATH` task name names, or None for a built-in task."""
    return task_name[len(FILE_PREFIX) :] if task_name.startswith(FILE_PREFIX) else None


DATA_SUFFIXES = (".tsv", ".jsonl")  # a data file's, named as file:PATH


def is_code(task: str) -> bool:
    """Whether --task names a task class in the user's own code: PATH.py:Class or
    package.module:Class (tasks/user_code.py)."""
    return data_path(task) is None and ":" in task


def short_name(task: str) -> str:
    """How headings, tables and new run folders name a task or a positional scheme: a
    class in the user's code by its class (ends.py:Ends -> Ends), read from the name alone
    (no code is loaded for it); any other by its name."""
    return task.rpartition(":")[2] if is_code(task) else task


def is_yaml(task: str) -> bool:
    """Whether --task names a task YAML file rather than a built-in task, a data file
    (file:data/pairs.tsv holds a / too) or a class in the user's code."""
    return (
        data_path(task) is None
        and not is_code(task)
        and (task.endswith((".yaml", ".yml")) or "/" in task)
    )


def names_built_in(task: str) -> bool:
    """Whether --task can only be a built-in task's name: not file:PATH, nor a data file
    named without it, nor a YAML file."""
    data_file = data_path(task) is not None or task.lower().endswith(DATA_SUFFIXES)
    return not data_file and not is_yaml(task) and not is_code(task)


def at_target(seq_acc: float | None, target: float) -> bool:
    """The one rule for "target reached": a held-out exact match at or above
    train.target_seq_acc (training stops once every seed's is)."""
    return seq_acc is not None and seq_acc >= target


def preset_names() -> list[str]:
    return sorted(p.name[: -len(".yaml")] for p in _presets().iterdir() if p.name.endswith(".yaml"))


def _presets():
    """The presets folder: package data when installed, `tasks/` in a source checkout."""
    try:
        return resources.files("jabcli.presets")
    except ModuleNotFoundError:  # an editable install maps no package onto tasks/
        return Path(__file__).resolve().parents[2] / "tasks"


def preset(name: str) -> dict[str, Any] | None:
    """The YAML preset of a built-in task, or None when there is none by that name."""
    if name not in preset_names():
        return None
    return yaml.safe_load((_presets() / f"{name}.yaml").read_text()) or {}


def read_yaml(path: Path) -> dict[str, Any]:
    """A YAML mapping from a file, or a one-line error naming the file."""
    if path.is_dir():
        raise JabError(f"{path} is a folder, not a YAML file")
    if not path.is_file():
        raise JabError(f"config file {str(path)!r} does not exist")
    try:
        data = yaml.safe_load(path.read_text())
    except UnicodeDecodeError:
        raise JabError(f"{path} is not a YAML text file") from None
    except OSError as err:
        raise JabError(f"could not read {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        if mark and not path.read_text()[mark.index :].strip():  # nothing after it
            where = " (at its end: something left open)"
        raise JabError(f"{path} is not valid YAML{where}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise JabError(f"{path} must hold a YAML mapping of sections (task, model, train)")
    return data


def apply(config: Config, data: dict[str, Any], source: str) -> None:
    """Overlay a nested mapping onto `config`, checking every key and type."""
    for section, values in data.items():
        if section not in SECTIONS:
            raise JabError(
                f"unknown config section {section!r} in {source}{suggest(str(section), SECTIONS)}; "
                f"sections: {', '.join(SECTIONS)}"
            )
        if not isinstance(values, dict):
            raise JabError(f"config section {section!r} in {source} must be a mapping")
        for key, value in values.items():
            set_key(config, f"{section}.{key}", value, source)


def set_key(
    config: Config, dotted: str, value: Any, source: str = "--set", raw: str | None = None
) -> None:
    """Set one key; `raw` is the text typed after `=`, used as is for string keys."""
    section, _, key = dotted.partition(".")
    names = {f"{s}.{f.name}" for s, cls in SECTIONS.items() for f in dataclasses.fields(cls)}
    if dotted in SECTIONS:
        some = ", ".join(f"{dotted}.{f.name}" for f in dataclasses.fields(SECTIONS[dotted])[:3])
        raise JabError(
            f"{dotted!r} in {source} is a config section: set one of its keys ({some}, ...)"
        )
    if dotted not in names:
        raise JabError(f"unknown config key {dotted!r} in {source}{suggest_key(dotted, names)}")
    target = getattr(config, section)
    expected = type(getattr(target, key))
    if expected is str and raw is not None:
        value = raw  # --set task.alphabet=0123 means the text 0123, not YAML's octal 83
    value = coerce(dotted, value, expected, source)
    if isinstance(value, float) and not math.isfinite(value):
        typed = raw if raw is not None else value
        raise JabError(f"{dotted} must be a finite number, got {typed!r}")
    setattr(target, key, value)


def suggest_key(dotted: str, names: set[str]) -> str:
    """' (did you mean 'train.learning_rate'?)' for 'train.lr' (a key's initials, any
    case) or a close spelling."""
    section, _, key = dotted.partition(".")
    by_initials = [
        repr(name)
        for name in sorted(names)
        if name.startswith(f"{section}.")
        and "_" in name
        and key.lower() == "".join(w[0] for w in name.partition(".")[2].split("_"))
    ]
    if by_initials:
        return f" (did you mean {' or '.join(by_initials)}?)"
    return suggest(dotted, names)


def coerce(dotted: str, value: Any, expected: type, source: str = "--set") -> Any:
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if expected is float and isinstance(value, str):
        try:
            return float(value)  # YAML 1.1 reads 3e-3 (no dot) as a string
        except ValueError:
            pass
    if not isinstance(value, expected) or isinstance(value, bool) != (expected is bool):
        hint = " (quote it in YAML)" if expected is str else ""
        where = "" if source == "--set" else f" in {source}"
        raise JabError(
            f"config key {dotted!r} must be {expected.__name__}, got {type(value).__name__} "
            f"{value!r}{where}{hint}"
        )
    return value


def parse_set(assignment: str) -> tuple[str, Any, str]:
    """`model.d_model=128` -> ("model.d_model", 128, "128"): the value read as YAML, and raw."""
    if "=" not in assignment:
        raise JabError(f"--set takes key=value (for example model.d_model=128), got {assignment!r}")
    key, _, raw = assignment.partition("=")
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        value = raw
    return key.strip(), value, raw


def for_seed(config: Config, seed: int) -> Config:
    """One seed's config out of a group's: its own train.seed, and train.seeds 1."""
    return dataclasses.replace(config, train=dataclasses.replace(config.train, seed=seed, seeds=1))


def from_dict(data: dict[str, Any], source: str) -> Config:
    config = Config()
    apply(config, data, source)
    validate(config)
    return config


def validate(config: Config) -> None:
    """The checks that need nothing but the config (see experiment.py for the rest)."""
    t, m, tr = config.task, config.model, config.train
    if not 0.0 < t.held_out < 1.0:
        raise JabError(f"task.held_out must be between 0 and 1, got {t.held_out}")
    positive = {
        "task.min_len": t.min_len,
        "task.max_len": t.max_len,
        "model.d_model": m.d_model,
        "model.num_heads": m.num_heads,
        "model.num_layers": m.num_layers,
        "model.loops": m.loops,
        "model.d_ff": m.d_ff,
        "model.max_positions": m.max_positions,
        "model.memory_cell_size": m.memory_cell_size,
        "train.batch_size": tr.batch_size,
        "train.steps": tr.steps,
        "train.seeds": tr.seeds,
        "train.log_every": tr.log_every,
        "train.eval_every": tr.eval_every,
        "train.eval_samples": tr.eval_samples,
        "train.keep_checkpoints": tr.keep_checkpoints,
        "train.learning_rate": tr.learning_rate,
    }
    for key, value in positive.items():
        if value <= 0:
            raise JabError(f"{key} must be positive, got {value}")
    for key, value in {
        "train.warmup_steps": tr.warmup_steps,
        "train.weight_decay": tr.weight_decay,
        "train.clip_norm": tr.clip_norm,
        "train.seed": tr.seed,
        "model.memory_size": m.memory_size,
    }.items():
        if value < 0:
            raise JabError(f"{key} must be zero or more, got {value}")
    if m.max_positions > MAX_POSITIONS:
        raise JabError(
            f"model.max_positions must be at most {MAX_POSITIONS}, got {m.max_positions}"
        )
    if tr.steps > STEPS_MAX:
        raise JabError(f"train.steps must be at most {STEPS_MAX}, got {tr.steps}")
    if abs(t.shift) > MAX_SHIFT:
        raise JabError(f"task.shift must be between -{MAX_SHIFT} and {MAX_SHIFT}, got {t.shift}")
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            value = getattr(getattr(config, section), f.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise JabError(f"{section}.{f.name} must be a finite number, got {value}")
    if tr.seed + tr.seeds > 2**32:
        raise JabError(
            f"train.seed + train.seeds must be at most 2**32, got {tr.seed} + {tr.seeds}"
        )
    if t.min_len > t.max_len:
        raise JabError(f"task.min_len ({t.min_len}) must not exceed task.max_len ({t.max_len})")
    if not 0.0 <= m.dropout < 1.0:
        raise JabError(f"model.dropout must be in [0, 1), got {m.dropout}")
    if not 0.0 <= tr.final_lr_fraction <= 1.0:
        raise JabError(f"train.final_lr_fraction must be in [0, 1], got {tr.final_lr_fraction}")
    if not 0.0 <= tr.adam_b2 < 1.0:
        raise JabError(f"train.adam_b2 must be in [0, 1), got {tr.adam_b2}")
    if not 0.0 < tr.target_seq_acc <= 1.0:
        raise JabError(f"train.target_seq_acc must be in (0, 1], got {tr.target_seq_acc}")
    for key, allowed in CHOICES.items():
        section, _, name = key.partition(".")
        value = getattr(getattr(config, section), name)
        if value not in allowed:
            raise JabError(f"{key} must be one of {', '.join(allowed)}, got {value!r}")
    for name in tr.log_to.split(","):
        if name.strip() not in (*LOGGERS, ""):
            raise JabError(
                f"train.log_to takes {' or '.join(LOGGERS)} (or both, comma-separated), "
                f"got {name.strip()!r}{suggest(name.strip(), LOGGERS)}"
            )
    if len(set(t.alphabet)) != len(t.alphabet):
        raise JabError(f"task.alphabet repeats characters: {t.alphabet!r}")
