"""What a run is: its config, and the task, tokenizer, positional scheme and model
functions built from it, once per command.

`resolve` layers a config the way `jab train` is asked for it (defaults <- task preset or
task YAML file or data file <- --config <- --set <- --steps/--seed) and builds the
Experiment; `Experiment.create` builds one from a saved config. Every check that needs
to know what the task or the scheme is happens here, before anything is written.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax

from jabcli.core import config as configuration
from jabcli.core import settings
from jabcli.core.config import DATA_SUFFIXES, is_yaml
from jabcli.core.errors import JabError, suggest
from jabcli.core.settings import FILE_PREFIX, Config, ModelConfig, TaskConfig, data_path
from jabcli.core.tokenizer import DATA_CHARS, HINTS, Tokenizer
from jabcli.model.contract import Form, ModelFns
from jabcli.model.positions import PositionalScheme
from jabcli.model.registry import get_form
from jabcli.tasks import derived, sampling, user_code
from jabcli.tasks.batch import Batch
from jabcli.tasks.contract import Task
from jabcli.tasks.datafile import DataFile, FileTask
from jabcli.tasks.hinted import Hinted
from jabcli.tasks.registry import TASKS, task_class


@dataclass(frozen=True, eq=False)
class Experiment:
    """Everything fixed for a run; `config` has the task's alphabet filled in."""

    config: Config
    task: Task
    tokenizer: Tokenizer
    src_scheme: PositionalScheme  # the encoder's positional scheme
    tgt_scheme: PositionalScheme  # the decoder's (model.arch=encoder: the encoder's)
    model: ModelFns

    # Two experiments built from the same config and vocabulary are the same experiment:
    # equal, with one hash, so that a program compiled for one (jitted with the experiment
    # as a static argument, or kept by `training.compiled`) serves the other, and a second
    # call in the same Python session (the API, a notebook) neither traces nor compiles
    # again. A file task's data is not in its config: such an experiment is only itself.
    @functools.cached_property
    def _identity(self) -> tuple:
        if not self.task.generated:
            return (id(self),)
        config = json.dumps(self.config.to_dict(), sort_keys=True)
        return (config, tuple(self.tokenizer.tokens), self.code_digest)

    @functools.cached_property
    def code_digest(self) -> str:
        """A digest of the user's own code the experiment runs (its task's, schemes' and
        form's files; "" for jab's own): a program compiled for it, kept in this process
        or on disk (runtime.kept_path), is one for that code, not for an edited file of
        the same name."""
        task = self.task.task if isinstance(self.task, Hinted) else self.task
        return user_code.code_digest([task, self.src_scheme, self.tgt_scheme, self.form])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Experiment) and self._identity == other._identity

    def __hash__(self) -> int:
        return hash(self._identity)

    @classmethod
    def create(
        cls, config: Config, tokenizer: Tokenizer | None = None, data: DataFile | None = None
    ) -> Experiment:
        """Build and check; `data` is the task's data file when already read; the
        tokenizer is the shared vocabulary (with the index hints if the task has them)
        unless a saved run's is given."""
        t, m = config.task, config.model
        if tokenizer is None and data is None and data_path(t.name) is not None:
            data = DataFile.read(data_path(t.name))  # its characters make the vocabulary
        tokenizer = tokenizer or new_tokenizer(t, data)
        task = build_task(t, tokenizer, data)
        if t.alphabet and t.alphabet != task.alphabet:
            raise JabError(
                f"task {t.name} always uses the alphabet {task.alphabet!r}; "
                f"task.alphabet cannot change it (got {t.alphabet!r})"
            )
        if t.min_len < task.min_length:
            raise JabError(
                f"task {t.name} needs task.min_len >= {task.min_length}, got {t.min_len}"
            )
        if isinstance(task, FileTask):
            task.check_lengths(t.min_len, t.max_len)
        form = get_form(m.arch)
        form.check(m)
        src_scheme, tgt_scheme = form.schemes(m, task)
        if not form.positional:  # its default encoding was never read: the config says so
            m = dataclasses.replace(m, pos_encoding=src_scheme.name)
        t = dataclasses.replace(t, alphabet=task.alphabet)
        config = dataclasses.replace(config, task=t, model=m)
        model = build_model(m, src_scheme, tgt_scheme, len(tokenizer), task)
        experiment = cls(config, task, tokenizer, src_scheme, tgt_scheme, model)
        experiment.check_length(t.max_len, f"task.max_len {t.max_len}")
        return experiment

    @property
    def form(self) -> Form:
        """The model form `model.arch` names (model/contract.py)."""
        return get_form(self.config.model.arch)

    @property
    def one_pass(self) -> bool:
        """Whether the form answers every symbol in one pass from empty answer slots,
        rather than token by token."""
        return self.form.one_pass

    @property
    def packs(self) -> bool:
        """Whether training packs two examples per row (packing.py): asked for, the task
        draws its own lengths, and the model form packs."""
        return self.config.train.pack and self.task.generated and self.form.packs

    def positions_needed(self, max_len: int) -> int:
        """Model positions that sources of up to `max_len` symbols need."""
        source, answer = derived.widths(self.task, max_len)
        return self.form.positions_needed(self.src_scheme, self.tgt_scheme, source, answer)

    def longest_input(self) -> int:
        """The most symbols an input may have: what the model's positions (and, with
        index hints, the hints) allow."""
        limit = self.config.model.max_positions
        longest = next(n for n in range(limit, 0, -1) if self.positions_needed(n) <= limit)
        return min(longest, HINTS) if self.config.task.index_hints else longest

    def check_length(self, max_len: int, what: str) -> None:
        """Sources of up to `max_len` symbols must fit in the model's positions."""
        if self.config.task.index_hints and max_len > HINTS:
            raise JabError(
                f"{what} is longer than the {HINTS} symbols that task.index_hints can number"
            )
        needed = self.positions_needed(max_len)
        m = self.config.model
        if needed > m.max_positions:
            raise JabError(
                f"{what} needs {needed} positions, but the model takes at most "
                f"model.max_positions = {m.max_positions} ({m.positions} encoding)"
            )

    def sample(
        self,
        key: jax.Array,
        batch_size: int,
        min_len: int | None = None,
        max_len: int | None = None,
    ) -> Batch:
        t = self.config.task
        return sampling.sample(
            self.task,
            key,
            batch_size,
            t.min_len if min_len is None else min_len,
            t.max_len if max_len is None else max_len,
        )

    def positions(
        self, key: jax.Array, src: jax.Array, tgt_len: int
    ) -> tuple[jax.Array, jax.Array]:
        """The positions the model reads for sources [B, S] and targets [B, tgt_len], as
        the model form places them (for the encoder-decoder, the decoder's scheme pairs
        them with the encoder's; for the encoder form, the slots continue the source)."""
        limit = self.config.model.max_positions
        return self.form.positions(
            key, self.src_scheme, self.tgt_scheme, self.task, src, tgt_len, limit
        )


def build_model(
    m: ModelConfig,
    src_scheme: PositionalScheme,
    tgt_scheme: PositionalScheme,
    vocab_size: int,
    task: Task,
) -> ModelFns:
    """The model functions of the form `model.arch` names."""
    return get_form(m.arch).build(m, src_scheme, tgt_scheme, vocab_size, task)


def check_hints(name: str, task: Task, tokenizer: Tokenizer) -> None:
    """Index hints need a task whose answer symbols are input symbols, and hint tokens."""
    if not derived.hintable(task):
        hintable = [n for n, cls in TASKS.items() if derived.hintable(cls(tokenizer=tokenizer))]
        raise JabError(
            f"task.index_hints needs a task whose answer symbols are its input's symbols "
            f"({', '.join(hintable)}); {name} is not one"
        )
    if tokenizer.hint_start is None:
        raise JabError("task.index_hints is set, but the run's vocabulary has no index hints")


def new_tokenizer(t: TaskConfig, data: DataFile | None = None) -> Tokenizer:
    """A new run's vocabulary: the shared one, with the index hints if the task takes them,
    and, for a task of the user's own or a data file's, the symbols it uses that the shared
    one lacks. A built-in task's alphabet must be of the shared characters."""
    if data is not None:
        return Tokenizer.for_symbols(data.symbols, hints=t.index_hints)
    cls = users_task(t.name)
    if cls is not None:
        used = t.alphabet + cls.default_alphabet + cls.symbols  # answers may write any
        return Tokenizer.for_symbols(used, hints=t.index_hints)
    outside = sorted(set(t.alphabet) - set(DATA_CHARS))
    if outside:
        raise JabError(
            f"task.alphabet has characters the tokenizer lacks: {''.join(outside)!r}; "
            f"allowed: {DATA_CHARS!r}"
        )
    return Tokenizer.with_hints() if t.index_hints else Tokenizer()


def build_task(t: TaskConfig, tokenizer: Tokenizer, data: DataFile | None = None) -> Task:
    """The task a config names, with its options: a built-in one or `file:PATH`."""
    path = data_path(t.name)
    if path is not None:
        if data is None or data.path != path:
            data = DataFile.read(path, tokenizer)
        trained = (t.min_len, t.max_len)
        task = FileTask(tokenizer=tokenizer, data=data, held_out=t.held_out, trained=trained)
    else:
        cls = task_class(t.name)
        if users_task(t.name) is None:  # a built-in task: its options are config keys
            options = {name: getattr(t, name) for name in cls.options()}
        else:  # the user's own: its options as set (task.own), the rest at their defaults
            unknown = sorted(set(t.own) - set(cls.options()))
            if unknown:
                raise JabError(
                    f"task {settings.short_name(t.name)} has no option {unknown[0]!r}; its "
                    f"options: {', '.join(cls.options()) or 'none'}"
                )
            options = dict(t.own)
        alphabet = "" if cls.fixed_alphabet else t.alphabet
        task = cls(alphabet=alphabet, tokenizer=tokenizer, **options)
    if t.index_hints:  # the task, wrapped: index hints are no task's own business
        check_hints(t.name, task, tokenizer)
        return Hinted(task=task)
    return task


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
            named = f"--{key}" if source == "--set" else key  # as the caller names it
            configuration.set_key(config, f"train.{key}", value, named)
    configuration.validate(config)
    check_own_options(config.task.name, given)
    experiment = Experiment.create(config, None, data)
    t = experiment.config.task
    if users_task(t.name) is not None:  # the user's own: checked before it trains
        task = experiment.task.task if isinstance(experiment.task, Hinted) else experiment.task
        user_code.check_answers(task, jax.random.PRNGKey(0), t.min_len, t.max_len)
    if data is not None and t.max_len > experiment.task.longest:  # a new run only
        raise JabError(
            f"{data.path}'s inputs are at most {experiment.task.longest} symbols long; "
            f"task.max_len {t.max_len} would pad every batch for nothing (set at most "
            f"{experiment.task.longest})"
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
    default = fields[name].default
    if default is dataclasses.MISSING:
        default = fields[name].default_factory()
    expected = type(default)
    if expected is str and raw is not None:
        value = raw  # the text as typed, as for jab's own string keys
    config.task.own[name] = configuration.coerce(key, value, expected, source)


def users_task(name: str) -> type[Task] | None:
    """The class of the task `name` when it is one of the user's own, else None."""
    if data_path(name) is not None or name in TASKS:
        return None
    return task_class(name)


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
    if data_path(task) is not None and data_path(str(named)) is not None:
        here = (path.parent / data_path(str(named))).resolve()
        return None if Path(data_path(task)).resolve() == here else str(named)
    return None if str(named) == task else str(named)


def apply_data_file(config: Config, name: str) -> DataFile:
    """A data file's own defaults, its input alphabet and range of input lengths."""
    data = DataFile.read(data_path(name))
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
    if isinstance(named, str) and data_path(named) is not None:
        name = FILE_PREFIX + str(path.parent / data_path(named))
        values = {**values, "task": {**task, "name": name}}
        data = apply_data_file(config, name)
    configuration.apply(config, values, str(path))
    return data
