"""A new run's config, layered the way `jab train` is asked for it: defaults <- task
preset, task YAML file or data file <- --config <- --set <- --steps/--seed/--seeds, with a
user's task's own options (`task.<field>`) checked against its class; then the
`Experiment` built from it (experiment.py). The layering of one YAML mapping or one
`--set` onto a config, and each key's checks, are core/config.py's; what is here needs to
know the tasks.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import jax

from jabcli.core import config as configuration
from jabcli.core import settings
from jabcli.core.config import DATA_SUFFIXES, is_yaml
from jabcli.core.errors import JabError, suggest
from jabcli.core.settings import FILE_PREFIX, Config, data_path
from jabcli.experiment.experiment import Experiment, users_task
from jabcli.tasks import user_code
from jabcli.tasks.datafile import DataFile, FileTask
from jabcli.tasks.hinted import Hinted
from jabcli.tasks.registry import TASKS, task_class


def resolve(
    task: str | None,
    config_file: Path | None = None,
    sets: list[str] | None = None,
    steps: int | None = None,
    seed: int | None = None,
    seeds: int | None = None,
    overrides: dict[str, Any] | None = None,
    source: str = "--set",
) -> Experiment:
    """Defaults <- task preset (or task YAML file, or data file) <- --config <- --set
    <- `overrides` (config keys and values, as a study file gives them; errors name
    `source`) <- --steps/--seed/--seeds, checked and built."""
    config, data = Config(), None
    if task is not None:
        if data_path(task) is not None:
            data = apply_data_file(config, task)
        elif task.lower().endswith(DATA_SUFFIXES):
            raise JabError(f"to train on a data file, name it file:{task}")
        elif is_yaml(task):
            data = apply_file(config, Path(task))
        else:
            task_class(task)  # the registry decides; raises with the list of valid tasks
            found = configuration.preset(task) or {}  # a preset is optional
            configuration.apply(
                config, {**found, "task": {"name": task, **found.get("task", {})}}, f"preset {task}"
            )
    if config_file is not None:
        other = other_task(config_file, task)
        if other is not None:  # the file would silently win over the command line
            raise JabError(
                f"--task {task} and --config {config_file} (task {other}) name different "
                "tasks: give one of them"
            )
        data = apply_file(config, config_file) or data
    if task is None and config_file is None:
        raise JabError(f"name a task with --task (one of: {', '.join(TASKS)}) or a --config file")
    files = [Path(task)] if task is not None and is_yaml(task) else []
    files += [config_file] if config_file is not None else []
    from_files = task is None or is_yaml(task)  # no preset or data file names the task
    named = any(configuration.parse_set(a)[0] == "task.name" for a in sets or [])
    named = named or "task.name" in (overrides or {})
    if from_files and not named and not any(names_task(path) for path in files):
        raise JabError(
            f"{files[0]} names no task: add task: {{name: NAME}} (one of: {', '.join(TASKS)})"
        )
    given = [option for path in files for option in file_options(path)]  # (key, where)
    for assignment in sets or []:
        key, value, raw = configuration.parse_set(assignment)
        set_key(config, key, value, "--set", raw)
        given.append((key, "--set"))
    for key, value in (overrides or {}).items():
        set_key(config, key, value, source)
        given.append((key, source))
    for key, value in (("steps", steps), ("seed", seed), ("seeds", seeds)):
        if value is not None:  # checked as a config key: the API may pass 1.5
            flag = f"--{key}" if source == "--set" else key  # as the caller names it
            configuration.set_key(config, f"train.{key}", value, flag)
    configuration.validate(config)
    check_own_options(config.task.name, given)
    experiment = Experiment.create(config, None, data)
    t = experiment.config.task
    if users_task(t.name) is not None:  # the user's own: checked before it trains
        own = experiment.task.task if isinstance(experiment.task, Hinted) else experiment.task
        user_code.check_answers(own, jax.random.PRNGKey(0), t.min_len, t.max_len)
    read = experiment.task if isinstance(experiment.task, FileTask) else None
    if data is not None and read is not None and t.max_len > read.longest:  # a new run only
        raise JabError(
            f"{data.path}'s inputs are at most {read.longest} symbols long; "
            f"task.max_len {t.max_len} would pad every batch for nothing (set at most "
            f"{read.longest})"
        )
    return experiment


def set_key(config: Config, key: str, value: Any, source: str, raw: str | None = None) -> None:
    """`configuration.set_key`, and for a task of the user's own its own options: a
    `task.<field>` key that is one of its dataclass fields, kept in task.own, checked
    against the type of the field's default."""
    section, _, name = key.partition(".")
    cls = users_task(config.task.name)
    if section != "task" or cls is None or name in settings.keys_of("task"):
        configuration.set_key(config, key, value, source, raw)
        return
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if name not in cls.options():
        own = [f"task.{option}" for option in cls.options()]
        raise JabError(
            f"unknown config key {key!r} in {source}{suggest(key, own)}; task "
            f"{settings.short_name(config.task.name)} takes "
            f"{', '.join(own) or 'no options of its own'}"
        )
    field = fields[name]
    default = field.default_factory() if callable(field.default_factory) else field.default
    expected = type(default)
    if expected is str and raw is not None:
        value = raw  # the text as typed, as for jab's own string keys
    config.task.own[name] = configuration.coerce(key, value, expected, source)


def check_own_options(name: str, given: list[tuple[str, str]]) -> None:
    """Refuse a task option asked for by name (`given`: key and where it was given) that
    the task does not take, such as task.modulus for copy: it would change nothing. Keys
    declared `every_task` are every task's; the others (task.modulus, task.shift, ...) are
    some tasks' own (`Task.options`)."""
    own = ["held_out"] if data_path(name) is not None else task_class(name).options()
    declared = settings.keys()
    for key, where in given:
        part, _, option = key.partition(".")
        every_task = key in declared and declared[key].every_task
        if part == "task" and not every_task and option not in own:
            takes = f"its own options: {', '.join(f'task.{o}' for o in own)}"
            raise JabError(
                f"task {name} takes no {key} (from {where}); "
                f"{takes if own else 'it has no options of its own'}"
            )


def file_options(path: Path) -> list[tuple[str, str]]:
    """The task options a YAML file sets away from their defaults (read as the config
    reads them: `held_out: 1e-1` is the default 0.1), with where; one written out at its
    default changes nothing, whichever the task."""
    task, defaults = configuration.read_yaml(path).get("task"), Config().task
    if not isinstance(task, dict):
        return []
    found = []
    for key, value in task.items():
        if hasattr(defaults, key):  # (apply_file has refused an unknown key or a bad type)
            default = getattr(defaults, key)
            if configuration.coerce(f"task.{key}", value, type(default)) != default:
                found.append((f"task.{key}", str(path)))
    return found


def names_task(path: Path) -> bool:
    """Whether a YAML config file sets task.name."""
    task = configuration.read_yaml(path).get("task")
    return isinstance(task, dict) and task.get("name") is not None


def other_task(path: Path, task: str | None) -> str | None:
    """The task the YAML file `path` names, where the command line's `task` names
    another (a saved run's config.yaml names the run's task); else None."""
    named = configuration.read_yaml(path).get("task")
    named = named.get("name") if isinstance(named, dict) else None
    if task is None or named is None:
        return None
    if is_yaml(task):
        mine = configuration.read_yaml(Path(task)).get("task")
        task = mine.get("name") if isinstance(mine, dict) else None
        if task is None:
            return None
    mine, theirs = data_path(task), data_path(str(named))
    if mine is not None and theirs is not None:
        here = (path.parent / theirs).resolve()
        return None if Path(mine).resolve() == here else str(named)
    return None if str(named) == task else str(named)


def apply_data_file(config: Config, name: str) -> DataFile:
    """A data file's own defaults, its input alphabet and range of input lengths."""
    data = DataFile.read(name.removeprefix(FILE_PREFIX))
    configuration.apply(config, {"task": {"name": name, **data.defaults()}}, name)
    return data


def apply_file(config: Config, path: Path) -> DataFile | None:
    """Overlay a YAML file; a data file it names is found next to it and lays its
    defaults underneath."""
    values = configuration.read_yaml(path)
    values = {k: v for k, v in values.items() if k not in configuration.RUN_RECORD_KEYS}
    task = values.get("task")
    named = task.get("name") if isinstance(task, dict) else None
    data = None
    relative = data_path(named) if isinstance(named, str) else None
    if isinstance(task, dict) and relative is not None:
        name = FILE_PREFIX + str(path.parent / relative)
        values = {**values, "task": {**task, "name": name}}
        data = apply_data_file(config, name)
    configuration.apply(config, values, str(path))
    return data
