"""How a study is asked to run, checked once for `jab study run` and `jab.study()`: which
backend options go together (`check_backend`), and the folder a study runs into unless
told otherwise (`default_folder`). Each caller names the options its own way (`--workers`
on the command line, `workers` in Python); the checks and their words are the same."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from jabcli.core.errors import JabError
from jabcli.studies.studies import Study, slug


def check_backend(
    workers: int | None,
    ray: str | None,
    cpus_per_cell: float,
    gpus_per_cell: float,
    named: Callable[[str], str] = lambda option: option,
) -> None:
    """Refuse backend options that do not go together: a cell's CPUs and GPUs without Ray,
    or a number of workers with it. `named` turns an option's name (`cpus_per_cell`) into
    the caller's (`--cpus-per-cell`)."""
    if ray is None and (cpus_per_cell != 1.0 or gpus_per_cell != 0.0):
        raise JabError(
            f"{named('cpus_per_cell')} and {named('gpus_per_cell')} go with {named('ray')}"
        )
    if ray is not None and workers is not None:
        raise JabError(
            f"{named('workers')} is for this machine; with {named('ray')} the cluster decides"
        )


def flag(option: str) -> str:
    """An option's name as the command line writes it: cpus_per_cell -> --cpus-per-cell."""
    return "--" + option.replace("_", "-")


def default_folder(study: Study) -> Path:
    """Where a study runs unless told: runs/<its name as a folder name>."""
    return Path("runs") / slug(study.name)
