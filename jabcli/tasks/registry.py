"""The registry of built-in tasks: `jab train --task NAME` looks NAME up here, and
`jab tasks`, shell completion and every error naming the tasks list this one dict. A new
task is a class on the contract (contract.py) and one entry here."""

from __future__ import annotations

from jabcli.core.errors import JabError, suggest
from jabcli.tasks.arithmetic import Addition, BinaryAddition, BinaryMultiplication, ComputeSqrt
from jabcli.tasks.classification import CycleNavigation, EvenPairs, MissingDuplicate, ParityCheck
from jabcli.tasks.contract import Task
from jabcli.tasks.modular import ModularArithmetic, ModularArithmeticBrackets, SolveEquation
from jabcli.tasks.strings import (
    BucketSort,
    Copy,
    Duplicate,
    OddsFirst,
    Reverse,
    Shift,
    Sort,
    StackManipulation,
)

TASKS: dict[str, type[Task]] = {
    task.name: task
    for task in (
        # jab's own, and the string tasks of the benchmark
        Copy, Reverse, Duplicate, Shift, OddsFirst, Sort, BucketSort, Addition,
        # the rest of the Chomsky-hierarchy benchmark (Delétang et al. 2023), by level
        ParityCheck, EvenPairs, CycleNavigation, ModularArithmetic,
        StackManipulation, ModularArithmeticBrackets, SolveEquation,
        MissingDuplicate, BinaryAddition, BinaryMultiplication, ComputeSqrt,
    )
}  # fmt: skip


def task_class(name: str) -> type[Task]:
    """The task called `name`: a built-in one, a class in the user's code (PATH.py:Class,
    package.module:Class) or one an installed package registers (user_code.py); else an
    error listing them all."""
    if name in TASKS:
        return TASKS[name]
    from jabcli.core.settings import is_code
    from jabcli.tasks import user_code

    if is_code(name):
        return user_code.task_from_code(name)
    installed = user_code.entry_points()
    if name in installed:
        return user_code.task_from_entry_point(installed[name])
    names = [*TASKS, *installed]
    raise JabError(
        f"unknown task {name!r}{suggest(name, names)}; valid tasks: {', '.join(names)}, "
        "file:PATH for your own data or PATH.py:Class for your own task"
    )
