"""Run configuration: defaults, task presets, YAML files and `--set key=value` overrides.

Everything is validated here, before anything is written to disk.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from jabcli.errors import JabError
from jabcli.positions import ENCODINGS
from jabcli.tasks import FILE_PREFIX, TASKS, Task, get_task, make_task, suggest
from jabcli.tokenizer import DATA_CHARS


@dataclass
class TaskConfig:
    name: str = "reverse"
    min_len: int = 1
    max_len: int = 16
    alphabet: str = "0123456789"
    shift: int = 1  # shift: how far to rotate
    reverse_answer: bool = False  # addition: write the sum least significant digit first
    held_out: float = 0.1  # file:PATH tasks: share of distinct inputs kept for evaluation


@dataclass
class ModelConfig:
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2
    d_ff: int = 256
    dropout: float = 0.0
    norm: str = "post"
    activation: str = "relu"
    pos_encoding: str = "sinusoidal"
    max_positions: int = 1024  # longest sequence (source + <eos>, or target + <eos>) it takes


@dataclass
class TrainConfig:
    batch_size: int = 64
    steps: int = 2000
    learning_rate: float = 3e-3
    warmup_steps: int = 200
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    seed: int = 0
    log_every: int = 50
    eval_every: int = 200
    eval_samples: int = 512
    target_seq_acc: float = 0.995
    keep_checkpoints: int = 3


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
    "model.pos_encoding": ENCODINGS,
}
MAX_POSITIONS = 4096  # the most model.max_positions may be: the tables are compiled in
MAX_SHIFT = 1_000_000


def preset_names() -> list[str]:
    return sorted(p.name[: -len(".yaml")] for p in _presets().iterdir() if p.name.endswith(".yaml"))


def _presets():
    """The presets folder: package data when installed, `tasks/` in a source checkout."""
    try:
        return resources.files("jabcli.presets")
    except ModuleNotFoundError:  # an editable install maps no package onto tasks/
        return Path(__file__).resolve().parent.parent / "tasks"


def read_yaml(path: Path) -> dict[str, Any]:
    """A YAML mapping from a file, or a one-line error naming the file."""
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
        raise JabError(f"{path} is not valid YAML{where}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise JabError(f"{path} must hold a YAML mapping of sections (task, model, train)")
    return data


def preset(name: str) -> dict[str, Any]:
    """The YAML preset of a built-in task."""
    if name not in preset_names():
        get_task(name)  # raises with the list of valid tasks
    return yaml.safe_load((_presets() / f"{name}.yaml").read_text()) or {}


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
    if dotted not in names:
        raise JabError(f"unknown config key {dotted!r} in {source}{suggest(dotted, names)}")
    target = getattr(config, section)
    expected = type(getattr(target, key))
    if expected is str and raw is not None:
        value = raw  # --set task.alphabet=0123 means the text 0123, not YAML's octal 83
    setattr(target, key, coerce(dotted, value, expected))


def coerce(dotted: str, value: Any, expected: type) -> Any:
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if expected is float and isinstance(value, str):
        try:
            return float(value)  # YAML 1.1 reads 3e-3 (no dot) as a string
        except ValueError:
            pass
    if not isinstance(value, expected) or isinstance(value, bool) != (expected is bool):
        hint = " (quote it in YAML)" if expected is str else ""
        raise JabError(
            f"config key {dotted!r} must be {expected.__name__}, got {type(value).__name__} "
            f"{value!r}{hint}"
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


def resolve(
    task: str | None,
    config_file: Path | None = None,
    sets: list[str] | None = None,
    steps: int | None = None,
    seed: int | None = None,
) -> Config:
    """Defaults <- task preset (or task YAML file) <- --config <- --set <- --steps/--seed."""
    config = Config()
    if task is not None:
        if task.startswith(FILE_PREFIX):
            apply(config, file_preset(task), task)
        elif task.endswith((".yaml", ".yml")) or "/" in task:
            apply_file(config, read_yaml(Path(task)), task)
        else:
            apply(config, preset(task), f"preset {task}")
    if config_file is not None:
        apply_file(config, read_yaml(config_file), str(config_file))
    if task is None and config_file is None:
        raise JabError(f"name a task with --task (one of: {', '.join(TASKS)}) or a --config file")
    for assignment in sets or []:
        key, value, raw = parse_set(assignment)
        set_key(config, key, value, "--set", raw)
    builtin = TASKS.get(config.task.name)
    if builtin and builtin.fixed_alphabet and config.task.alphabet == TaskConfig.alphabet:
        config.task.alphabet = builtin.alphabet  # never set: the task's own, not the default
    if steps is not None:
        config.train.steps = steps
    if seed is not None:
        config.train.seed = seed
    validate(config)
    return config


def apply_file(config: Config, data: dict[str, Any], source: str) -> None:
    """Overlay a YAML file's mapping; one naming a data file gets that file's alphabet and
    lengths underneath it."""
    named = data.get("task", {}).get("name") if isinstance(data.get("task"), dict) else None
    if isinstance(named, str) and named.startswith(FILE_PREFIX) and named != config.task.name:
        apply(config, file_preset(named), named)
    apply(config, data, source)


def file_preset(name: str) -> dict[str, Any]:
    """A data file's own defaults: its input alphabet and its range of input lengths."""
    task = make_task(TaskConfig(name=name))
    return {"task": {"name": name, **task.preset()}}


def from_dict(data: dict[str, Any], source: str) -> Config:
    config = Config()
    apply(config, data, source)
    validate(config)
    return config


def validate(config: Config) -> None:
    t, m, tr = config.task, config.model, config.train
    if not 0.0 < t.held_out < 1.0:
        raise JabError(f"task.held_out must be between 0 and 1, got {t.held_out}")
    task = make_task(t)
    positive = {
        "task.min_len": t.min_len,
        "task.max_len": t.max_len,
        "model.d_model": m.d_model,
        "model.num_heads": m.num_heads,
        "model.num_layers": m.num_layers,
        "model.d_ff": m.d_ff,
        "model.max_positions": m.max_positions,
        "train.batch_size": tr.batch_size,
        "train.steps": tr.steps,
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
    }.items():
        if value < 0:
            raise JabError(f"{key} must be zero or more, got {value}")
    if m.max_positions > MAX_POSITIONS:
        raise JabError(
            f"model.max_positions must be at most {MAX_POSITIONS}, got {m.max_positions}"
        )
    check_positions(task, m, t.max_len, f"task.max_len {t.max_len}")
    if abs(t.shift) > MAX_SHIFT:
        raise JabError(f"task.shift must be between -{MAX_SHIFT} and {MAX_SHIFT}, got {t.shift}")
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            value = getattr(getattr(config, section), f.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise JabError(f"{section}.{f.name} must be a finite number, got {value}")
    if tr.seed >= 2**32:
        raise JabError(f"train.seed must be below 2**32, got {tr.seed}")
    if t.min_len < task.min_length:
        raise JabError(f"task {t.name} needs task.min_len >= {task.min_length}, got {t.min_len}")
    if t.min_len > t.max_len:
        raise JabError(f"task.min_len ({t.min_len}) must not exceed task.max_len ({t.max_len})")
    task.check_lengths(t.min_len, t.max_len)
    if m.d_model % m.num_heads:
        raise JabError(
            f"model.d_model ({m.d_model}) must be divisible by model.num_heads ({m.num_heads})"
        )
    if m.pos_encoding == "rope" and (m.d_model // m.num_heads) % 2:
        raise JabError(
            f"rope rotates pairs of dimensions: model.d_model / model.num_heads "
            f"({m.d_model} / {m.num_heads}) must be even"
        )
    if not 0.0 <= m.dropout < 1.0:
        raise JabError(f"model.dropout must be in [0, 1), got {m.dropout}")
    if not 0.0 < tr.target_seq_acc <= 1.0:
        raise JabError(f"train.target_seq_acc must be in (0, 1], got {tr.target_seq_acc}")
    for key, allowed in CHOICES.items():
        section, _, name = key.partition(".")
        value = getattr(getattr(config, section), name)
        if value not in allowed:
            raise JabError(f"{key} must be one of {', '.join(allowed)}, got {value!r}")
    if task.fixed_alphabet and t.alphabet != task.alphabet:
        raise JabError(
            f"task {t.name} always uses the alphabet {task.alphabet!r}; "
            f"task.alphabet cannot change it (got {t.alphabet!r})"
        )
    if not t.alphabet:
        raise JabError("task.alphabet must not be empty")
    outside = sorted(set(t.alphabet) - set(DATA_CHARS))
    if outside:
        raise JabError(
            f"task.alphabet has characters the tokenizer lacks: {''.join(outside)!r}; "
            f"allowed: {DATA_CHARS!r}"
        )
    if len(set(t.alphabet)) != len(t.alphabet):
        raise JabError(f"task.alphabet repeats characters: {t.alphabet!r}")


def check_positions(task: Task, model: ModelConfig, max_len: int, what: str) -> None:
    """Sources of up to `max_len` symbols must fit in the model's positions."""
    needed = task.positions_needed(max_len)
    if needed > model.max_positions:
        raise JabError(
            f"{what} needs {needed} positions, but the model takes at most "
            f"model.max_positions = {model.max_positions} ({model.pos_encoding} encoding)"
        )
