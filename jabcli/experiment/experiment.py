"""What a run is: its config, and the task, tokenizer, positional scheme and model
functions built from it, once per command.

`Experiment.create` builds one from a config (a new run's, layered by resolve.py, or a
saved run's) and makes every check that needs to know what the task or the scheme is,
before anything is written.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass

import jax

from jabcli.core import settings
from jabcli.core.errors import JabError
from jabcli.core.settings import Config, ModelConfig, TaskConfig, data_path
from jabcli.core.tokenizer import DATA_CHARS, HINTS, Tokenizer
from jabcli.model.contract import Form, ModelFns
from jabcli.model.positions import PositionalScheme
from jabcli.model.registry import get_form
from jabcli.tasks import derived, host_answers, sampling, user_code
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
        return (self.keyed_settings, tuple(self.tokenizer.tokens), self.code_digest)

    @functools.cached_property
    def keyed_settings(self) -> str:
        """Its config as JSON text, as what it computes is told apart by: a user's file
        named by its class alone, its code being in `code_digest` (the same file elsewhere
        is the same experiment)."""
        return json.dumps(user_code.placeless(self.config.to_dict()), sort_keys=True)

    @functools.cached_property
    def code_digest(self) -> str:
        """A digest of the user's own code the experiment runs (its task's, schemes' and
        form's files; "" for jab's own): a program compiled for it, kept in this process
        or on disk (runtime.kept_path), is one for that code, not for an edited file of
        the same name."""
        task = self.task.task if isinstance(self.task, Hinted) else self.task
        return user_code.code_digest([task, self.src_scheme, self.tgt_scheme, self.form])

    @property
    def storable(self) -> bool:
        """Whether what is compiled for it may be kept on disk (core/runtime.py): not for a
        file task (its data shapes its programs) nor a task answered on the host (a
        program that calls back into this process cannot be stored)."""
        return self.task.generated and not host_answers.answered_on_host(self.task)

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
        path = data_path(t.name)
        if tokenizer is None and data is None and path is not None:
            data = DataFile.read(path)  # its characters make the vocabulary
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
    task: Task
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


def users_task(name: str) -> type[Task] | None:
    """The class of the task `name` when it is one of the user's own, else None."""
    if data_path(name) is not None or name in TASKS:
        return None
    return task_class(name)
