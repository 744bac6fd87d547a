"""What a caller of jab's Python API gives, checked as the command line's options are
checked by Typer: paths, inputs, ranges of lengths, flags, a task given as a class, a
checkpoint, numbers of CPUs; a wrong one is a `JabError` naming the argument."""

from __future__ import annotations

import math
import sysconfig
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from jabcli.core.errors import JabError
from jabcli.core.lengths import length_range as parse_range


def path_of(value: Any, what: str) -> Path | None:
    """A path given as a string or a Path (None: the default), else the error naming `what`."""
    if value is None or isinstance(value, Path):
        return value
    if isinstance(value, str):
        return Path(value)
    raise JabError(f"{what} takes a path (a string or a Path), got {value!r}")


def input_texts(value: Any) -> list[str]:
    """`run.predict`'s inputs: one string (one input, not characters) or strings."""
    example = "like run.predict('12345') or run.predict(['12', '345'])"
    if isinstance(value, str):
        return [value]
    if not isinstance(value, Iterable) or isinstance(value, (bytes, bytearray)):
        raise JabError(f"inputs are strings of the task's symbols, {example}; got {value!r}")
    texts = list(value)
    for text in texts:
        if not isinstance(text, str):
            raise JabError(f"inputs are strings of the task's symbols, {example}; got {text!r}")
    if not texts:
        raise JabError(f"give at least one input, {example}")
    return texts


def length_range(value: Any) -> tuple[int | None, int | None]:
    """`(1, 32)`, `[1, 32]`, `"1-32"` or `17` as a range of input lengths."""
    if isinstance(value, str):
        return parse_range(value, "lengths")
    if type(value) is int:
        return value, value
    if isinstance(value, (tuple, list)) and len(value) == 2:
        if all(v is None or type(v) is int for v in value):  # None: the run's own bound
            return value[0], value[1]
    raise JabError(f"lengths takes (shortest, longest), '1-32' or one length, got {value!r}")


def yes_or_no(value: Any, what: str) -> bool:
    """A flag given as True or False (not "yes", which Python would read as true)."""
    if type(value) is not bool:
        raise JabError(f"{what} takes True or False, got {value!r}")
    return value


def task_reference(task: Any) -> tuple[str, dict[str, Any]]:
    """`train`'s task: a name, a YAML file, file:PATH or PATH.py:Class as the command line
    takes it; or a task class of the user's own (`jab.train(Ends)`) or an instance of one
    (`jab.train(Repeat(times=3))`, its fields as task.<field> options), named by the file
    that defines it, which the run keeps a copy of."""
    import inspect

    from jabcli.tasks.contract import Task

    if isinstance(task, (str, Path)):
        return str(task), {}
    cls = type(task) if isinstance(task, Task) else task
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise JabError(
            f"task takes a task name, a task YAML file, file:PATH, PATH.py:Class or a task "
            f"class, got {task!r}"
        )
    try:
        source = inspect.getfile(cls)
    except (TypeError, OSError):
        source = ""
    if not source.endswith(".py") or "<" in cls.__qualname__:
        raise JabError(
            f"task {cls.__name__} is not defined at the top of a .py file (a notebook cell's or "
            "a function's class cannot be kept with the run): put it in one, or pass PATH.py:Class"
        )
    own = {}
    if isinstance(task, Task):
        defaults = cls()
        own = {
            f"task.{name}": getattr(task, name)
            for name in cls.options()
            if getattr(task, name) != getattr(defaults, name)
        }
        if task.alphabet != defaults.alphabet:
            own["task.alphabet"] = task.alphabet
    installed = {sysconfig.get_paths()[kind] for kind in ("purelib", "platlib")}
    if any(source.startswith(folder) for folder in installed):  # an installed package's
        return f"{cls.__module__}:{cls.__qualname__}", own
    return f"{source}:{cls.__qualname__}", own  # a file of the user's: the run keeps a copy


def checkpoint_name(value: Any) -> str:
    """`jab eval --checkpoint`: best, latest or a step (an int here too)."""
    if type(value) is int and value >= 0:
        return str(value)
    if isinstance(value, str) and (value in ("best", "latest") or value.isdigit()):
        return value
    raise JabError(f"checkpoint takes 'best', 'latest' or a step number, got {value!r}")


def amount(value: Any) -> bool:
    """Whether `value` is a finite number of zero or more (of CPUs, of GPUs)."""
    return type(value) in (int, float) and math.isfinite(value) and value >= 0
