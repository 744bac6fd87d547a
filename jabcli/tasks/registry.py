"""The registry of built-in tasks: `jab train --task NAME` looks NAME up here, and
`jab tasks`, shell completion and every error naming the tasks list this one dict."""

from __future__ import annotations

from jabcli.core.errors import JabError, suggest
from jabcli.tasks.arithmetic import (
    Addition,
    BinaryAddition,
    BinaryMultiplication,
    ComputeSqrt,
    ModularArithmetic,
    ModularArithmeticBrackets,
    SolveEquation,
)
from jabcli.tasks.tasks import (
    BucketSort,
    Copy,
    CycleNavigation,
    Duplicate,
    EvenPairs,
    MissingDuplicate,
    OddsFirst,
    ParityCheck,
    Reverse,
    Shift,
    Sort,
    StackManipulation,
    Task,
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
    """The built-in task called `name`, or an error listing them all."""
    if name not in TASKS:
        raise JabError(
            f"unknown task {name!r}{suggest(name, TASKS)}; valid tasks: {', '.join(TASKS)}, "
            "or file:PATH for your own data"
        )
    return TASKS[name]
