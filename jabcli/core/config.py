"""Run configuration: the defaults, YAML files and `--set key=value` overrides.

This module reads the keys as settings.py declares them, and makes the checks that need
nothing but the config itself. What a config means (which task, which positional scheme) and the
checks that need those is `experiment.py`'s job. Presets (`tasks/NAME.yaml`) hold
only what differs from the defaults below.
"""

from __future__ import annotations

import dataclasses
import math
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from jabcli.core.errors import JabError, suggest
from jabcli.core.settings import SECTIONS, Config, Setting, data_path, is_code, keys

# What a run's config.yaml holds beside its config: given to --config (to train a new run
# like a saved one), they are skipped; the new run has today's vocabulary.
RUN_RECORD_KEYS = ("format", "created", "vocab")


SAMPLES = 1000  # held-out inputs `jab eval` decodes by default
SAMPLES_PER_LENGTH = 200  # ... and per length, with --lengths (and `jab compare`)


LOGGERS = ("tensorboard", "wandb")  # train.log_to's choices, comma-separated


DATA_SUFFIXES = (".tsv", ".jsonl")  # a data file's, named as file:PATH


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
    names = set(keys())
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
    """The checks that need nothing but the config (see experiment.py for the rest): each
    key's as declared, then those across keys."""
    for key, setting in keys().items():
        section, _, name = key.partition(".")
        check(key, getattr(getattr(config, section), name), setting)
    t, tr = config.task, config.train
    if tr.seed + tr.seeds > 2**32:
        raise JabError(
            f"train.seed + train.seeds must be at most 2**32, got {tr.seed} + {tr.seeds}"
        )
    if t.min_len > t.max_len:
        raise JabError(f"task.min_len ({t.min_len}) must not exceed task.max_len ({t.max_len})")
    for name in tr.log_to.split(","):
        if name.strip() not in (*LOGGERS, ""):
            raise JabError(
                f"train.log_to takes {' or '.join(LOGGERS)} (or both, comma-separated), "
                f"got {name.strip()!r}{suggest(name.strip(), LOGGERS)}"
            )
    if len(set(t.alphabet)) != len(t.alphabet):
        raise JabError(f"task.alphabet repeats characters: {t.alphabet!r}")


def check(key: str, value: Any, setting: Setting) -> None:
    """Refuse a value that its declaration does not allow, in one line naming `key`. A
    class in the user's code passes a key's choices where the key takes one (is_code)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise JabError(f"{key} must be a finite number, got {value}")
    allowed = setting.choices
    if allowed and value not in allowed and not (setting.code and is_code(value)):
        raise JabError(f"{key} must be one of {', '.join(allowed)}, got {value!r}")
    above, at_least, below, at_most = (
        setting.above,
        setting.at_least,
        setting.below,
        setting.at_most,
    )
    if (
        (above is None or value > above)
        and (at_least is None or value >= at_least)
        and (below is None or value < below)
        and (at_most is None or value <= at_most)
    ):
        return
    low, high = at_least if above is None else above, at_most if below is None else below
    if isinstance(value, float) and low is not None and high is not None:  # a fraction's range
        if above is not None and below is not None:
            wanted = f"between {low} and {high}"
        else:
            wanted = (
                f"in {'[' if above is None else '('}{low}, {high}{']' if below is None else ')'}"
            )
    elif above is not None and value <= above:
        wanted = "positive" if above == 0 else f"more than {above}"
    elif at_least is not None and value < at_least:
        wanted = "zero or more" if at_least == 0 else f"at least {at_least}"
    else:
        wanted = f"less than {below}" if below is not None else f"at most {at_most}"
    raise JabError(f"{key} must be {wanted}, got {value}")
