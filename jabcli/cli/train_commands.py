"""`jab train` and `jab resume`: a training session (training/session.py) drawn live by
the terminal's `TrainView`, then how it ended, with the commands to run next.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer

from jabcli.cli.interrupt import interrupted
from jabcli.cli.options import (
    SEED_MAX,
    STEPS_MAX,
    NoCacheOption,
    StepsOption,
    complete_run,
    complete_task,
    configure_jax,
    known_task,
    run_folders,
    run_option,
    runs_given,
)
from jabcli.core.errors import JabError


def train(
    task: Annotated[
        str | None,
        typer.Option(
            "--task",
            metavar="NAME|FILE.yaml|file:PATH",
            callback=known_task,
            autocompletion=complete_task,
            help="A built-in task name (see jab tasks), a task YAML file, or file:PATH, "
            "a file of input/output pairs (.tsv or .jsonl).",
        ),
    ] = None,
    config_file: Annotated[
        Path | None,
        typer.Option(
            "--config", metavar="FILE.yaml", help="A YAML config layered over the task preset."
        ),
    ] = None,
    sets: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="KEY=VALUE",
            help="Override a config key: --set model.d_model=128 (repeatable).",
        ),
    ] = None,
    steps: StepsOption = None,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed", min=0, max=SEED_MAX, metavar="S", help="Random seed (overrides train.seed)."
        ),
    ] = None,
    seeds: Annotated[
        int | None,
        typer.Option(
            "--seeds",
            min=1,
            metavar="N",
            help="Train N models side by side, seeds S..S+N-1, into one group folder "
            "with a run per seed (overrides train.seeds).",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", metavar="DIR", help="Run folder to create (default: runs/<task>-<timestamp>)."
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue the run RUN (default: the newest) from its newest checkpoint; "
            "the same as jab resume [RUN].",
        ),
    ] = False,
    run: Annotated[
        Path | None,
        typer.Argument(
            metavar="RUN", callback=run_folders, help="With --resume: the run to continue."
        ),
    ] = None,
    no_cache: NoCacheOption = False,
) -> None:
    """Train a model on a task, showing the learning live."""
    if resume:
        if task or config_file or sets or seed is not None or seeds is not None or out:
            raise JabError(
                "--resume continues a run with its saved config; only --steps may change"
            )
        resume_command(run, steps, no_cache=no_cache)
        return
    if run is not None:
        raise JabError(f"unexpected argument {str(run)!r}; did you mean {meant(run)}?")
    from jabcli.cli.live import TrainView
    from jabcli.training import session

    configure_jax(no_cache)
    from jabcli.experiment.resolve import resolve

    experiment = resolve(task, config_file, sets, steps, seed, seeds)
    finish(lambda: session.start(experiment, out, TrainView()))


def meant(word: Path) -> str:
    """What `jab train WORD` most likely meant: a task's name (a newcomer's `jab train
    reverse`), else a run to continue."""
    from jabcli.tasks.registry import TASKS

    if str(word) in TASKS and not word.exists():
        return f"--task {word}"
    return f"--resume {word}"


def resume_command(
    run: Annotated[
        Path | None,
        typer.Argument(
            metavar="RUN",
            callback=runs_given,
            autocompletion=complete_run,
            help="Run folder or group of seeds (default: the newest under runs/).",
        ),
    ] = None,
    steps: Annotated[
        int | None,
        typer.Option(
            "--steps",
            min=1,
            max=STEPS_MAX,
            metavar="N",
            help="Train up to this step (saved in the run).",
        ),
    ] = None,
    run_as_option: Annotated[Path | None, run_option("The run, as RUN.")] = None,
    no_cache: NoCacheOption = False,
) -> None:
    """Continue a run from its newest valid checkpoint, with its saved config."""
    from jabcli.cli.live import TrainView
    from jabcli.cli.options import one_run
    from jabcli.training import session

    run = one_run(run_as_option, run)
    configure_jax(no_cache)
    finish(lambda: session.resume(run, steps, TrainView()))


def finish(training) -> None:
    """Train, then say how training ended; an interrupted run exits with 128 + the signal."""
    from jabcli.cli.display import commands, console, say
    from jabcli.cli.tables import summary
    from jabcli.training.session import Interrupted

    try:
        outcome = training()
    except KeyboardInterrupt as err:  # before Typer turns it into a silent exit
        if not isinstance(err, Interrupted):
            interrupted()
        if err.kept is not None:  # stopped at once, but what it kept resumes all the same
            commands("Resume with:", [f"jab resume {shlex.quote(str(err.kept))}"])
        interrupted(err.message)
    path = shlex.quote(str(outcome.path))  # commands to paste, whatever the folder name
    one = shlex.quote(str(outcome.runs[0].path))  # show-attention takes one seed
    if outcome.interrupted_by is not None:
        say(f"Interrupted at step {outcome.step}; checkpoint saved in {outcome.path}")
        commands("Resume with:", [f"jab resume {path}"])
        raise typer.Exit(128 + outcome.interrupted_by)
    console.print()
    console.print(summary(outcome))
    records = [r for r in outcome.runs[0].read_metrics() if "eval_seq_acc" in r]
    if len(records) >= 2:  # how held-out exact match rose, in a few lines
        from jabcli.api.plots import Plot
        from jabcli.cli.pictures import CurvesView
        from jabcli.inspection.curves import curve

        console.print(CurvesView(Plot([curve(outcome.path, "eval_seq_acc")]), height=8))
    if not outcome.reached_target:
        commands(
            "Target not reached; to train longer:",
            [f"jab resume {path} --steps {2 * outcome.step}"],
        )
    from jabcli.model.registry import get_form

    config, _ = outcome.runs[0].load_config()
    drawn = [f"jab show-attention --run {one}"] if get_form(config.model.arch).attention else []
    commands("Next:", [f"jab eval --run {path}", *drawn])
