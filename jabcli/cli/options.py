"""What the commands share: the options and arguments several take (`--run`,
`--checkpoint`, `--no-cache`, `RUN...`), the shell's completion of tasks and runs, the
checks on a run folder and a `--save` file, and the run a command works on when `--run`
is not given. Imports nothing heavy: `jab --help` reads these.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.models import ArgumentInfo, OptionInfo

from jabcli.core.errors import JabError, install


def complete_task(incomplete: str) -> list[str]:
    """Shell completion of --task: the built-in tasks, as `jab tasks` lists them (the
    registry imports no JAX), and file: for a data file."""
    from jabcli.tasks.registry import TASKS

    return [name for name in [*TASKS, "file:"] if name.startswith(incomplete)]


def known_task(value: str | None) -> str | None:
    """--task, when it can only name a built-in task, checked while the command line is
    read (the registry imports no JAX): a mistyped name is answered at once. A YAML file
    or file:PATH is read with the rest of the config."""
    from jabcli.core.config import names_built_in
    from jabcli.tasks.registry import task_class

    if value is not None and names_built_in(value):
        task_class(value)
    return value


def complete_run(incomplete: str) -> list[str]:
    """Shell completion of a run: the runs and groups of seeds under runs/ (and a group's
    seeds), as typed from the current folder."""
    from jabcli.runs.runs import GROUP_FILE, RUNS_DIR

    found = []
    for path in sorted(RUNS_DIR.glob("*")):
        if (path / "config.yaml").is_file() or (path / GROUP_FILE).is_file():
            found.append(str(path))
        found += [str(seed.parent) for seed in sorted(path.glob("seed-*/config.yaml"))]
    return [name for name in found if name.startswith(incomplete)]


def run_folders(value):
    """A run given as a file, not a folder, is a mistake worth its own words."""
    for path in value if isinstance(value, list) else [value]:
        if path is not None and path.exists() and not path.is_dir():
            raise JabError(f"{path} is a file, not a run folder")
    return value


def runs_given(value):
    """Runs named on the command line, checked to be runs (runs.open_runs: a missing
    folder, a study, a damaged run) while the command line is read: a mistyped run is
    answered at once, not after JAX is imported."""
    from jabcli.runs.runs import open_runs

    run_folders(value)
    for path in value if isinstance(value, list) else [value]:
        if path is not None:
            open_runs(path)
    return value


def runs_not_studies(value):
    """Runs named on the command line, a study among them left out with a note (`jab
    curves runs/*` picks up the studies in runs/ too), the rest checked as `runs_given`."""
    from jabcli.runs.runs import STUDY_FILE

    runs = []
    for path in value or []:
        if (path / STUDY_FILE).is_file():
            print(
                f"jab: note: {path} is a study: skipped (name its cells: {path}/*)",
                file=sys.stderr,
            )
        else:
            runs.append(path)
    if value and not runs:
        raise JabError(f"no runs to draw: {value[0]} is a study; name its cells: {value[0]}/*")
    return runs_given(runs)


def one_run(option: Path | None, argument: Path | None) -> Path | None:
    """The run named by --run or, as other commands take it, by its RUN argument: either,
    not both."""
    if option is not None and argument is not None and option != argument:
        raise JabError(f"name the run once: --run {option} or {argument}, not both")
    return option if option is not None else argument


SEED_MAX = 2**32 - 1
STEPS_MAX = 10**9  # as settings.STEPS_MAX, which `jab --help` need not import
SAMPLES_PER_LENGTH = 200  # as config.SAMPLES_PER_LENGTH, which `jab --help` need not import


def run_option(help: str) -> OptionInfo:
    """--run DIR: a run folder, completed by the shell (`Annotated[Path | None, ...]`)."""
    return typer.Option(
        "--run", metavar="DIR", callback=runs_given, autocompletion=complete_run, help=help
    )


RunOption = Annotated[Path | None, run_option("Run folder (default: the newest under runs/).")]
GroupRunOption = Annotated[
    Path | None, run_option("Run folder or group of seeds (default: the newest under runs/).")
]
CheckpointOption = Annotated[
    str,
    typer.Option(
        "--checkpoint",
        metavar="best|latest|STEP",
        help="Which checkpoint: best, latest or a step number.",
    ),
]
NoCacheOption = Annotated[
    bool,
    typer.Option(
        "--no-cache",
        help="Do not use the persistent compilation cache (nor the model shapes kept beside it).",
    ),
]
PlotSaveOption = Annotated[
    Path | None,
    typer.Option(
        "--save",
        metavar="FILE.svg|FILE.png|FILE.html",
        help="Also write the plot to a file: .svg or .png drawn by matplotlib "
        f"({install('plots')}), .html as the terminal draws it.",
    ),
]
StepsOption = Annotated[
    int | None,
    typer.Option(
        "--steps",
        min=1,
        max=STEPS_MAX,
        metavar="N",
        help="Number of training steps (overrides train.steps).",
    ),
]
SeedOption = Annotated[
    int,
    typer.Option("--seed", min=0, max=SEED_MAX, metavar="S", help="Seed of the held-out sample."),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print one JSON object instead of tables.")
]
LengthsOption = Annotated[
    str | None,
    typer.Option(
        "--lengths",
        help="Evaluate --samples inputs at every length in A-B (e.g. 1-64), "
        "including lengths beyond training.",
        metavar="A-B",
    ),
]


def run_argument(help: str) -> ArgumentInfo:
    """[RUN]: the run a command that also takes --run may take as its argument, as `jab
    resume RUN` and `jab compare RUN...` do (`Annotated[Path | None, ...]`)."""
    return typer.Argument(
        metavar="RUN",
        callback=runs_given,
        autocompletion=complete_run,
        help=f"{help} (the same as --run)",
        show_default=False,
    )


def runs_argument(help: str, callback: Callable[[Any], Any] = runs_given) -> ArgumentInfo:
    """RUN... arguments: run folders or groups of seeds (`callback` checks them), completed
    by the shell; or given as --run (`runs_option`, `all_runs`), as other commands take
    one (`Annotated[list[Path] | None, ...]`)."""
    return typer.Argument(
        metavar="RUN...",
        callback=callback,
        autocompletion=complete_run,
        help=help,
        show_default=False,
    )


def runs_option(callback: Callable[[Any], Any] = runs_given) -> OptionInfo:
    """--run DIR, repeatable: the RUN... arguments given as eval and predict take a run
    (`Annotated[list[Path] | None, ...]`)."""
    return typer.Option(
        "--run",
        metavar="DIR",
        callback=callback,
        autocompletion=complete_run,
        help="A run, as RUN... (repeatable).",
        show_default=False,
    )


def all_runs(arguments: list[Path] | None, options: list[Path] | None, what: str) -> list[Path]:
    """The runs of RUN... and of --run together; at least one."""
    runs = [*(arguments or []), *(options or [])]
    if not runs:
        raise JabError(f"name {what}: RUN... or --run DIR")
    return runs


def configure_jax(no_cache: bool) -> None:
    from jabcli.core import runtime

    runtime.configure(no_cache)


def chosen_run(run: Path | None):
    """The run --run names; without it, the newest, and a line on stderr saying which
    (the newest may not be the run the user has in mind)."""
    from jabcli.api import api
    from jabcli.runs.runs import open_runs

    one = api.load(run)
    if run is None:
        task = open_runs(one.path)[1][0].load_config()[0].task.name
        print(f"Using {one.path} ({task}), the newest run; choose one with --run", file=sys.stderr)
    return one


PLOT_FILES = (".svg", ".png", ".html")


def save_plot(view, save: Path) -> None:
    """Write a plot: .svg and .png drawn by matplotlib, .html as the terminal draws it."""
    from jabcli.api import plots
    from jabcli.cli.pictures import save_picture

    if save.suffix.lower() == ".html":
        save_picture(view, save)
    else:
        plots.save(view.plot, save)


def check_save(save: Path | None, suffixes: tuple[str, ...]) -> None:
    """Refuse a --save file of another type, or in a folder that does not exist."""
    if save is None:
        return
    if save.suffix.lower() not in suffixes:
        kinds = ", ".join(suffixes[:-1]) + f" or {suffixes[-1]}" if len(suffixes) > 1 else ""
        raise JabError(f"--save writes {kinds} files, got {str(save)!r}")
    if not save.parent.is_dir():
        raise JabError(f"cannot save to {save}: folder {save.parent} does not exist")
    plotted = ".png" in suffixes and save.suffix.lower() in (".svg", ".png")  # matplotlib's
    if plotted and importlib.util.find_spec("matplotlib") is None:
        html = " (or save .html, the terminal's drawing)" if ".html" in suffixes else ""
        raise JabError(f"--save {save} needs matplotlib: {install('plots')}{html}")
