"""The user's own code: a task, a positional scheme or a model form named as
`PATH.py:Class` (a file) or `package.module:Class` (an importable module), or registered by
an installed package under an entry-point group (`jab.tasks`, `jab.positional_encodings`,
`jab.model_forms`; read only when a name is not one of jab's own). A task is checked
against the contract when it is loaded: missing members named, its `solve` and `targets`
compared on a sample batch, its `reads` kept inside the input; one with `solve` alone is
answered on the host.

A run keeps a copy of each file (`task-code.py`, runs/code_copies.py) and loads that copy,
so that it outlives the original. Code that travels inside a run folder is imported only
when it is trusted: its digest is one this machine's jab copied itself (the user trained
with it), or the user said `JAB_TRUST_CODE=1` (and then it is remembered).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
import traceback
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any

from jabcli.core.errors import JabError, Note, UserCodeError
from jabcli.core.runtime import cache_dir
from jabcli.tasks import host_answers
from jabcli.tasks.contract import Task
from jabcli.tasks.host_answers import solved_on_host

# The entry-point groups an installed package registers its tasks, positional schemes and
# model forms under.
ENTRY_POINTS = "jab.tasks"
SCHEME_ENTRY_POINTS = "jab.positional_encodings"
FORM_ENTRY_POINTS = "jab.model_forms"
# A run's copies of the user's files, by the config key that names each: what it imports
# only when trusted.
KEPT = {
    "task.name": "task-code.py",
    "model.pos_encoding": "pos_encoding-code.py",
    "model.src_pos_encoding": "src_pos_encoding-code.py",
    "model.tgt_pos_encoding": "tgt_pos_encoding-code.py",
    "model.arch": "arch-code.py",
}
CODE_FILE = KEPT["task.name"]
TRUSTED = "trusted-code"  # digests of the code this machine's jab ran, one a line


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def trusted_file() -> Path:
    """Beside jab's caches (runtime.cache_dir's folder): ~/.cache/jab/trusted-code."""
    return cache_dir().parent / TRUSTED


def trusted() -> set[str]:
    try:
        return set(trusted_file().read_text().split())
    except OSError:
        return set()


def trust(data: bytes) -> None:
    """Remember `data`'s digest as code the user ran: a run holding it loads it."""
    if digest(data) in trusted():
        return
    path = trusted_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            f.write(digest(data) + "\n")
    except OSError as err:  # a convenience lost, never a run: say so and go on
        warnings.warn(
            f"could not write {path} ({err.strerror}): commands that load this run's copy "
            "of your code will need JAB_TRUST_CODE=1",
            Note,
            stacklevel=2,
        )


def check_trusted(path: Path, data: bytes) -> None:
    """Refuse, in one line, to import `data`, a run's copy of code at `path`, unless it is
    code the user trained with on this machine or the user says JAB_TRUST_CODE=1 (then
    it is remembered)."""
    if digest(data) in trusted():
        return
    if os.environ.get("JAB_TRUST_CODE") != "1":
        raise JabError(
            f"{path} is code that came with the run, not code you trained with on this "
            "machine: read it, then run the command again with JAB_TRUST_CODE=1 to "
            "import it (it is remembered)"
        )
    trust(data)


def check_folder(folder: Path) -> None:
    """`check_trusted` for every copy of the user's code in a run, group or cell folder:
    what a study sends a machine of its Ray cluster, which trusts its driver."""
    for name in KEPT.values():
        for path in sorted(folder.rglob(name)):
            check_trusted(path, path.read_bytes())


def split(name: str, option: str = "--task") -> tuple[str, str]:
    """`where:Class` -> (where, Class), each checked to be there."""
    where, _, attribute = name.rpartition(":")
    if not where or not attribute.isidentifier():
        raise JabError(f"{option} {name}: name a class as PATH.py:Class or package.module:Class")
    return where, attribute


def version(name: str) -> str:
    """What tells two loads of `name` apart: the digest of the file a PATH.py:Class names
    (an edited file is another class), "" for a module or an entry point."""
    where = name.rpartition(":")[0]
    if not where.endswith(".py"):
        return ""
    try:
        return digest(Path(where).read_bytes())
    except OSError:
        return ""  # loading it says why


def task_from_code(name: str) -> type[Task]:
    """The task class `name` refers to (`PATH.py:Class` or `package.module:Class`), loaded
    and checked against the contract."""
    return checked(from_code(name, "--task"), name)


def from_code(name: str, option: str) -> Any:
    """What `name` (`PATH.py:Class` or `package.module:Class`, given as `option`) refers
    to, its module imported (a run's copy only if trusted)."""
    where, attribute = split(name, option)
    if where.endswith(".py"):
        module = import_file(Path(where))
    else:
        module = import_module(where)
    found = getattr(module, attribute, None)
    if found is None:
        raise JabError(f"{where} has no {attribute}")
    return found


def import_file(path: Path) -> Any:
    """The module of the Python file `path` (a run's copy only if trusted)."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise JabError(f"could not read {path}: {err.strerror}") from None
    if path.name in KEPT.values():
        check_trusted(path, data)
    module_name = f"jab_user_{digest(data)[:32]}"  # a changed file is another module
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise JabError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # (dataclasses look their module up there)
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        del sys.modules[module_name]
        raise UserCodeError(f"importing {path}", err, {str(path)}) from None
    return module


def import_module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name is not None and name.startswith(err.name):
            raise JabError(f"no module named {name!r} (is its package installed?)") from None
        raise UserCodeError(f"importing {name}", err, user_files(err)) from None
    except Exception as err:
        raise UserCodeError(f"importing {name}", err, user_files(err)) from None


def user_files(err: BaseException) -> set[str]:
    """The files of a traceback that are not jab's or Python's own: the user's."""
    own = (str(Path(__file__).parents[1]), sys.prefix, sys.base_prefix)
    return {
        frame.filename
        for frame in traceback.extract_tb(err.__traceback__)
        if not frame.filename.startswith(own)
    }


REQUIRED = ("name", "description", "solve")


def checked(found: Any, name: str) -> type[Task]:
    """`found`, checked to be a task class that defines what the contract asks for."""
    if not (isinstance(found, type) and issubclass(found, Task)):
        raise JabError(f"{name} is not a task: subclass jabcli.Task (from jabcli import Task)")
    missing = [
        member
        for member in REQUIRED
        if getattr(found, member) is getattr(Task, member) or getattr(found, member) == ""
    ]
    if missing:
        raise JabError(f"{name} does not define {', '.join(missing)} (see jabcli.Task)")
    if found.targets is Task.targets:  # `solve` alone: answered on the host
        return solved_on_host(found)
    return found


def entry_points(group: str = ENTRY_POINTS) -> dict[str, metadata.EntryPoint]:
    """What installed packages register under `group`, by name (read only when asked).
    Reading every package's entry points takes importlib.metadata 50 ms, a sixth of `jab
    tasks`: it is asked only when some package's entry_points.txt names the group (1-2 ms)."""
    if not any_registers(group):
        return {}
    return {point.name: point for point in metadata.entry_points(group=group)}


def from_entry_point(group: str, name: str) -> Any | None:
    """What an installed package registers as `name` under `group` (None: nothing), loaded."""
    point = entry_points(group).get(name)
    if point is None:
        return None
    try:
        return point.load()
    except Exception as err:
        raise UserCodeError(f"loading {point.value}", err, user_files(err)) from None


def any_registers(group: str = ENTRY_POINTS) -> bool:
    """Whether an installed package's entry_points.txt has the group `group`."""
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.endswith((".dist-info", ".egg-info")):
                try:
                    with open(os.path.join(entry, name, "entry_points.txt")) as f:
                        if f"[{group}]" in f.read():
                            return True
                except OSError:
                    continue
    return False


def task_from_entry_point(point: metadata.EntryPoint) -> type[Task]:
    try:
        found = point.load()
    except Exception as err:
        raise UserCodeError(f"loading {point.value}", err, user_files(err)) from None
    return checked(found, f"{point.value} (entry point {point.name})")


def code_digest(objects: list[Any]) -> str:
    """A digest of the files that define the classes of `objects` outside jab itself (the
    user's own code); "" when all are jab's."""
    import inspect

    own = str(Path(__file__).parents[1])
    parts = set()
    for obj in objects:
        module = type(obj).__module__
        if module.startswith("jab_user_"):  # imported by import_file: named by its digest
            parts.add(module)
        elif not inspect.getfile(type(obj)).startswith(own):  # an installed package's
            parts.add(digest(Path(inspect.getfile(type(obj))).read_bytes()))
    return digest("".join(sorted(parts)).encode()) if parts else ""


def placeless(value: Any) -> Any:
    """`value` (a config as a dict) with each `PATH.py:Class` reduced to `:Class`: where a
    user's file lies changes none of its programs, and what it holds is in `code_digest`.
    The same file in another folder (a study cell's temporary one on Ray, a test's) then
    finds the programs compiled for it."""
    if isinstance(value, dict):
        return {key: placeless(item) for key, item in value.items()}
    if isinstance(value, str):
        where, _, attribute = value.rpartition(":")
        if where.endswith(".py") and attribute.isidentifier():
            return f":{attribute}"
    return value


def check_answers(task: Task, key: Any, low: int, high: int, rows: int = 64) -> None:
    """Compare a user task's `targets` with its `solve` on a sample batch of inputs of
    `low` to `high` symbols: a task whose two answers disagree would train on one and be
    scored by the other. The first input where they differ is named."""
    import jax
    import numpy as np

    from jabcli.core.tokenizer import PAD_ID

    lengths = jax.random.randint(key, (rows,), low, high + 1)
    files = {sys.modules[type(task).__module__].__file__ or ""}
    try:
        drawn_tokens, drawn_answers, answer_lengths = task.draw(key, lengths, high)
    except Exception as err:
        raise host_answers.failure() or UserCodeError(
            f"{task.name}'s draw/targets", err, files
        ) from None
    tokens, answers = np.asarray(drawn_tokens), np.asarray(drawn_answers)
    for row in range(rows):
        text = task.tokenizer.decode([t for t in tokens[row] if t != PAD_ID])
        width = int(answer_lengths[row])
        drawn = task.tokenizer.decode(list(answers[row][:width]))
        try:
            solved = task.solve(text)
        except Exception as err:
            raise UserCodeError(f"{task.name}'s solve({text!r})", err, files) from None
        if solved is not None and solved != drawn:
            raise JabError(
                f"task {task.name}: solve and targets disagree on input {text!r}: solve "
                f"gives {solved!r}, targets {drawn!r}"
            )
    if type(task).reads is not Task.reads:
        check_reads(task, tokens, np.asarray(lengths), np.asarray(answer_lengths), files)
    if type(task).alignment is not Task.alignment:
        check_alignment(task, key, lengths, high, files)


def check_reads(task: Task, tokens: Any, lengths: Any, answer_lengths: Any, files) -> None:
    """A user task's `reads` names, for each answer step, a symbol of its input: one that
    points outside the input is named, with its input and step."""
    import jax.numpy as jnp
    import numpy as np

    width = int(answer_lengths.max())
    try:
        read = np.asarray(task.reads(jnp.arange(width)[None, :], jnp.asarray(lengths)[:, None]))
    except Exception as err:
        raise UserCodeError(f"{task.name}'s reads", err, files) from None
    for row, (length, answer) in enumerate(zip(lengths, answer_lengths)):
        for step in range(int(answer)):
            if not 0 <= read[row, step] < length:
                text = task.tokenizer.decode(tokens[row][: int(length)])
                raise JabError(
                    f"task {task.name}: reads points outside the input {text!r} at answer "
                    f"step {step}: index {int(read[row, step])} of {int(length)} symbols"
                )


def check_alignment(task: Task, key: Any, lengths: Any, high: int, files) -> None:
    """A user task's `alignment` gives each answer step that writes a symbol either
    UNALIGNED or an index one of its input's symbols has: one that lines up with nothing
    in the input is named, with its input and step."""
    import numpy as np

    from jabcli.core.tokenizer import EOS_ID, PAD_ID
    from jabcli.tasks import sampling
    from jabcli.tasks.batch import UNALIGNED

    batch = sampling.sample_lengths(task, key, lengths, high)
    rows, width = batch.tgt_in.shape
    try:
        source, answer = (np.asarray(a) for a in task.alignment(batch.src, width))
    except Exception as err:
        raise UserCodeError(f"{task.name}'s alignment", err, files) from None
    if source.shape != batch.src.shape or answer.shape != (rows, width):
        raise JabError(
            f"task {task.name}: alignment gives shapes {list(source.shape)} and "
            f"{list(answer.shape)}, not {list(batch.src.shape)} (the source and <eos>) and "
            f"{[rows, width]} (an index per answer step)"
        )
    writes = ~np.isin(np.asarray(batch.tgt_out), (PAD_ID, EOS_ID))  # a symbol of the answer
    for row in range(rows):
        inside = set(source[row][source[row] != UNALIGNED].tolist())
        for step in np.flatnonzero(writes[row]):
            index = int(answer[row, step])
            if index != UNALIGNED and index not in inside:
                text = task.tokenizer.decode(list(batch.src[row][: int(lengths[row])]))
                raise JabError(
                    f"task {task.name}: alignment points outside the input {text!r} at "
                    f"answer step {step}: index {index} lines up with none of its symbols"
                )
