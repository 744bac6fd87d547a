"""The `jab` command line: the I/O layer. Commands parse, call library code (session,
inspection), print through the terminal's modules (display.py, live.py, tables.py,
pictures.py) and choose exit codes; nothing else in jab prints or exits.

JAX is imported inside the commands that need it, so `jab --help` starts instantly.
"""

from __future__ import annotations

import contextlib
import enum
import importlib.util
import json
import os
import shlex
import sys
import warnings
from pathlib import Path
from typing import Annotated

import typer

from jabcli import __version__
from jabcli.cli.interrupt import interrupted
from jabcli.cli.pipes import QuietStdout, reader_gone
from jabcli.cli.workarounds import (
    ClickException,
    Command,
    Group,
    NoArgsIsHelpError,
    NoSuchOption,
    close_option,
    plain_words,
    quiet_broken_pipes,
)
from jabcli.core.errors import JabError, Note, suggest
from jabcli.core.lengths import length_range

app = typer.Typer(
    cls=Group,
    add_completion=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def command(name: str | None = None):
    return app.command(name, cls=Command)


def show_version(wanted: bool) -> None:
    if wanted:
        print(f"jab {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=show_version, is_eager=True, help="Print jab's version."
        ),
    ] = False,
) -> None:
    """Train small Transformers on algorithmic toy tasks and look at what they learned."""


def complete_task(incomplete: str) -> list[str]:
    """Shell completion of --task: the built-in tasks, as `jab tasks` lists them (the
    registry imports no JAX), and file: for a data file."""
    from jabcli.tasks.registry import TASKS

    return [name for name in [*TASKS, "file:"] if name.startswith(incomplete)]


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


SEED_MAX = 2**32 - 1
STEPS_MAX = 10**9  # as config.STEPS_MAX, which `jab --help` need not import
SAMPLES_PER_LENGTH = 200  # as config.SAMPLES_PER_LENGTH, which `jab --help` need not import


def run_option(help: str):
    """--run DIR: a run folder, completed by the shell."""
    return Annotated[
        Path | None,
        typer.Option(
            "--run", metavar="DIR", callback=run_folders, autocompletion=complete_run, help=help
        ),
    ]


RunOption = run_option("Run folder (default: the newest under runs/).")
GroupRunOption = run_option("Run folder or group of seeds (default: the newest under runs/).")
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


def RunsArgument(help: str):
    """RUN... arguments: run folders or groups of seeds, completed by the shell."""
    return Annotated[
        list[Path],
        typer.Argument(
            metavar="RUN...", callback=run_folders, autocompletion=complete_run, help=help
        ),
    ]


class Kind(str, enum.Enum):
    cross = "cross"
    encoder = "encoder"
    decoder = "decoder"


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


@command("tasks")
def tasks_command(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON list instead of a table.")
    ] = False,
) -> None:
    """List the built-in tasks."""
    from jabcli.cli.display import commands, console
    from jabcli.cli.tables import task_table
    from jabcli.core.config import TaskConfig, preset
    from jabcli.tasks.registry import TASKS

    rows = []
    for name, task in TASKS.items():
        defaults = {**TaskConfig().__dict__, **(preset(name) or {}).get("task", {})}
        rows.append(
            {
                "name": name,
                "description": task.description,
                "alphabet": defaults["alphabet"] or task().alphabet,
                "min_len": defaults["min_len"],
                "max_len": defaults["max_len"],
                "aligned": task().aligned,
                "level": task.level or None,  # regular, DCF or CS; None: jab's own
            }
        )
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    console.print(task_table(rows))
    commands("Train one with:", ["jab train --task NAME"])
    commands(
        "Or on your own input/output pairs (.tsv or .jsonl):", ["jab train --task file:PAIRS.tsv"]
    )


@command("runs")
def runs_command(
    root: Annotated[
        Path,
        typer.Argument(metavar="DIR", help="Folder holding runs (default: runs/)."),
    ] = Path("runs"),
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON list instead of a table.")
    ] = False,
) -> None:
    """List the runs (and groups of seeds) under DIR, newest first, and how each ended."""
    from jabcli.cli.display import console, say
    from jabcli.cli.tables import runs_table
    from jabcli.inspection.listing import listing
    from jabcli.runs.runs import RUNS_DIR

    if root.exists() and not root.is_dir():
        raise JabError(f"{root} is a file, not a folder of runs")
    if not root.exists() and root != RUNS_DIR:  # runs/ is there once a run is trained
        raise JabError(f"{root} does not exist: no folder of runs there")
    rows = listing(root)
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    if not rows:  # an empty list, as --json prints it: not an error
        say(f"No runs under {root}/; train one with: jab train --task reverse")
        return
    console.print(runs_table(rows))


@command()
def train(
    task: Annotated[
        str | None,
        typer.Option(
            "--task",
            metavar="NAME|FILE.yaml|file:PATH",
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
        resume_command(run, steps, no_cache)
        return
    if run is not None:
        raise JabError(f"unexpected argument {str(run)!r}; did you mean --resume {run}?")
    from jabcli.cli.live import TrainView
    from jabcli.training import session

    configure_jax(no_cache)
    from jabcli.model.experiment import resolve

    experiment = resolve(task, config_file, sets, steps, seed, seeds)
    finish(lambda: session.start(experiment, out, TrainView()))


@command("resume")
def resume_command(
    run: Annotated[
        Path | None,
        typer.Argument(
            metavar="RUN",
            callback=run_folders,
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
    no_cache: NoCacheOption = False,
) -> None:
    """Continue a run from its newest valid checkpoint, with its saved config."""
    from jabcli.cli.live import TrainView
    from jabcli.training import session

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
        interrupted(err.message if isinstance(err, Interrupted) else "")
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
        from jabcli.inspection.inspection import curve

        console.print(CurvesView(Plot([curve(outcome.path, "eval_seq_acc")]), height=8))
    if not outcome.reached_target:
        commands(
            "Target not reached; to train longer:",
            [f"jab resume {path} --steps {2 * outcome.step}"],
        )
    commands("Next:", [f"jab eval --run {path}", f"jab show-attention --run {one}"])


@command("eval")
def eval_command(
    run: GroupRunOption = None,
    samples: Annotated[
        int | None,
        typer.Option(
            "--samples",
            min=1,
            metavar="N",
            help="Held-out inputs to decode (default 1000; per length with --lengths: 200).",
        ),
    ] = None,
    lengths: LengthsOption = None,
    min_len: Annotated[
        int | None,
        typer.Option("--min-len", min=1, metavar="A", help="Shortest input (default: the run's)."),
    ] = None,
    max_len: Annotated[
        int | None,
        typer.Option("--max-len", min=1, metavar="B", help="Longest input (default: the run's)."),
    ] = None,
    checkpoint: CheckpointOption = "latest",
    seed: SeedOption = 1,
    force_length: Annotated[
        bool,
        typer.Option(
            "--force-length",
            help="Also decode with each answer's true length imposed and report that exact "
            "match: right symbols stopped at the wrong length, or wrong symbols?",
        ),
    ] = False,
    as_json: JsonOption = False,
    no_cache: NoCacheOption = False,
) -> None:
    """Measure a run on fresh held-out data: accuracy overall and by length."""
    from jabcli.cli.display import console, decoding
    from jabcli.cli.tables import eval_report
    from jabcli.runs.runs import open_runs

    if lengths is not None and (min_len is not None or max_len is not None):
        raise JabError("give either --lengths A-B or --min-len/--max-len, not both")
    each_length = lengths is not None
    if each_length:
        min_len, max_len = length_range(lengths, "--lengths")
    configure_jax(no_cache)
    one = chosen_run(run)
    passes = len(open_runs(one.path)[1]) * (2 if force_length else 1)
    with decoding(passes):
        result = one.evaluate(
            (min_len, max_len), samples, each_length, checkpoint, seed, force_length
        )
    if as_json:
        print(json.dumps(with_mistakes(result)))
        return
    console.print(eval_report(result, result["run"], tuple(result["train_lengths"])))


def with_mistakes(result: dict) -> dict:
    """A result for --json: its first 20 mistakes rather than every example; each seed's
    result of a group likewise."""
    out = {k: v for k, v in result.items() if k not in ("examples", "seeds")}
    if "seeds" in result:  # each seed's mistakes are its own
        out["seeds"] = [with_mistakes(one) for one in result["seeds"]]
    else:
        out["mistakes"] = [e for e in result["examples"] if not e["correct"]][:20]
    return out


@command()
def compare(
    runs: RunsArgument("Two or more run folders (a group of seeds counts as one)."),
    lengths: Annotated[
        str | None,
        typer.Option(
            "--lengths",
            help="Lengths to compare at, A-B (default: from the shortest training length "
            "to twice the longest, as far as every run's positions allow).",
            metavar="A-B",
        ),
    ] = None,
    samples: Annotated[
        int,
        typer.Option("--samples", min=1, metavar="N", help="Held-out inputs per length and run."),
    ] = SAMPLES_PER_LENGTH,
    checkpoint: CheckpointOption = "latest",
    seed: SeedOption = 1,
    as_json: JsonOption = False,
    save: Annotated[
        Path | None,
        typer.Option(
            "--save",
            metavar="FILE.svg|FILE.png",
            help="Also write exact match by length, a line per run, as a plot drawn by "
            "matplotlib (pip install 'jab\\[plots]').",
        ),
    ] = None,
    no_cache: NoCacheOption = False,
) -> None:
    """Put several runs' accuracy at each input length side by side."""
    from jabcli.api import api, plots
    from jabcli.cli.display import console, decoding, say
    from jabcli.cli.tables import comparison
    from jabcli.runs.runs import open_runs

    check_save(save, (".svg", ".png"))
    bounds = length_range(lengths, "--lengths") if lengths is not None else None
    tasks = [open_runs(path)[1][0].load_config()[0].task for path in runs]
    alphabets = list(dict.fromkeys(task.alphabet for task in tasks))
    if len(alphabets) > 1 and len({task.name for task in tasks}) == 1:  # else the table says
        print(
            f"jab: note: these runs draw inputs from different alphabets ({', '.join(alphabets)}):"
            " each is measured on inputs of its own alphabet, not on the same inputs",
            file=sys.stderr,
        )
    configure_jax(no_cache)
    with decoding(sum(len(open_runs(path)[1]) for path in runs)):
        results = api.compare(runs, bounds, samples, checkpoint, seed)
    if as_json:
        print(json.dumps([with_mistakes(r) for r in results]))
    else:
        console.print(comparison(results))
    if save is not None:
        plots.save(plots.comparison_plot(results), save)
        if not as_json:  # stdout is the JSON's alone
            say(f"Saved {save}")


@command()
def predict(
    texts: Annotated[
        list[str],
        typer.Argument(
            metavar="INPUT...",
            help="Inputs to answer, e.g. 12345 (spaces are ignored); - reads them from "
            "stdin, one per line.",
        ),
    ],
    run: RunOption = None,
    checkpoint: CheckpointOption = "latest",
    no_cache: NoCacheOption = False,
) -> None:
    """Answer each input and mark it against the task's reference answer.

    jab predict - < inputs.txt answers every line of a file.
    """
    from jabcli.cli.display import console
    from jabcli.cli.tables import predictions

    lines = [(f"line {n}: ", line) for n, line in stdin_lines()] if "-" in texts else []
    given = [each for text in texts for each in (lines if text == "-" else [("", text)])]
    if not given:  # (where an input came from, for its error; the input)
        raise JabError("- reads inputs from stdin, one per line, but there were none")
    configure_jax(no_cache)
    answered = chosen_run(run).predict([text for _, text in given], checkpoint, skip_bad=True)
    if answered:
        console.print(predictions(answered))
    for i, error in answered.skipped.items():  # after the table, where a reader sees them
        print(f"jab: error: {given[i][0]}{error}", file=sys.stderr)
    if answered.skipped:
        raise typer.Exit(2)


@command("show-attention")
def show_attention(
    run: RunOption = None,
    input_text: Annotated[
        str | None,
        typer.Option(
            "--input", metavar="TEXT", help="Input to decode (default: a random held-out one)."
        ),
    ] = None,
    kind: Annotated[
        Kind | None,
        typer.Option(
            "--kind",
            metavar="cross|encoder|decoder",
            help="Which attention to draw (default: cross; a model.arch=encoder run has "
            "encoder only).",
        ),
    ] = None,
    layer: Annotated[
        int,
        typer.Option("--layer", metavar="L", help="Layer index; negative counts from the last."),
    ] = -1,
    head: Annotated[
        str | None,
        typer.Option(
            "--head",
            metavar="H|mean",
            help="Head index (negative counts from the last) or 'mean' (default: all "
            "heads side by side).",
        ),
    ] = None,
    save: Annotated[
        Path | None,
        typer.Option(
            "--save",
            metavar="FILE.svg|FILE.html",
            help="Also write the picture to a file (it fetches nothing: fonts are local).",
        ),
    ] = None,
    checkpoint: CheckpointOption = "latest",
    no_cache: NoCacheOption = False,
) -> None:
    """Draw what the model attends to while answering one input."""
    from jabcli.cli.display import say
    from jabcli.cli.pictures import attention_view, save_picture, show_picture

    check_save(save, (".svg", ".html"))
    configure_jax(no_cache)
    one = chosen_run(run)
    attention = one.attention(input_text, kind and kind.value, layer, checkpoint)
    heads = len(attention.weights)
    if head not in (None, "mean") and not (
        head.lstrip("-").isdigit() and -heads <= int(head) < heads
    ):
        raise JabError(
            f"--head must be 'mean' or a head between 0 and {heads - 1} (or -1 for the "
            f"last), got {head!r}"
        )
    view = attention_view(attention, head, str(one.path))
    show_picture(view)
    if save is not None:
        save_picture(view, save)
        say(f"Saved {save}")


@command()
def curves(
    runs: RunsArgument("Runs or groups of seeds to draw, overlaid."),
    metric: Annotated[
        str,
        typer.Option(
            "--metric",
            metavar="NAME",
            help="loss, token_acc, seq_acc (training batch), eval_token_acc, eval_seq_acc "
            "(held-out), lr or grad_norm.",
        ),
    ] = "loss",
    save: Annotated[
        Path | None,
        typer.Option(
            "--save",
            metavar="FILE.svg|FILE.png|FILE.html",
            help="Also write the plot to a file: .svg or .png drawn by matplotlib (pip install "
            "'jab\\[plots]'), .html as the terminal draws it.",
        ),
    ] = None,
) -> None:
    """Draw how a metric moved during training, for one or several runs."""
    from jabcli.api import api
    from jabcli.api.plots import Plot
    from jabcli.cli.display import say
    from jabcli.cli.pictures import CurvesView, show_picture

    check_save(save, PLOT_FILES)
    view = CurvesView(Plot(api.curves(runs, metric)))
    show_picture(view)
    if save is not None:
        save_plot(view, save)
        say(f"Saved {save}")


@command()
def export(
    folders: RunsArgument("Runs, groups of seeds or studies whose metrics to export."),
    tensorboard: Annotated[
        bool,
        typer.Option(
            "--tensorboard",
            help="Write each run's metrics.jsonl as TensorBoard event files in its folder, "
            "replacing those written before (pip install 'jab\\[tensorboard]').",
        ),
    ] = False,
) -> None:
    """Write what runs logged to another tool's format, for runs trained without
    train.log_to; a study's, every cell's."""
    from jabcli.cli.display import say
    from jabcli.runs import loggers
    from jabcli.runs.runs import open_runs, study_runs

    if not tensorboard:
        raise JabError("say what to export to: jab export RUN... --tensorboard")
    exported = []  # every run's records, before any is written
    for folder in folders:
        cells = study_runs(folder)
        for run in open_runs(folder)[1] if cells is None else cells:
            if cells is not None and not run.read_metrics():  # a cell that failed early
                print(f"jab: note: {run.path} has no metrics yet: skipped", file=sys.stderr)
                continue
            exported.append((run, loggers.metrics_to_export(run)))
    loggers.require("tensorboard", "--tensorboard")
    for run, records in exported:
        for written in loggers.export_tensorboard(run, records):
            say(f"Wrote {written}")


study_app = typer.Typer(
    cls=Group,
    no_args_is_help=True,
    help="Ask a question of a grid of runs (tasks x encodings x seeds) at every length.",
)
app.add_typer(study_app, name="study")


@study_app.command("run", cls=Command)
def study_run_command(
    file: Annotated[
        Path, typer.Argument(metavar="FILE.yaml", help="The study file (see README, Studies).")
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            metavar="DIR",
            help="Study folder (default: runs/<study name>); run again to resume it.",
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            metavar="N",
            help="Cells trained at once on this machine (default: one per core).",
        ),
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="ADDRESS|auto|local",
            help="Run each cell as a task on a Ray cluster: its address (host:port), auto "
            "(RAY_ADDRESS or the cluster on this machine) or local (start one here); "
            "needs pip install 'jab\\[ray]'.",
        ),
    ] = None,
    cpus_per_cell: Annotated[
        float,
        typer.Option("--cpus-per-cell", metavar="C", help="With --ray: CPUs a cell asks for."),
    ] = 1.0,
    gpus_per_cell: Annotated[
        float,
        typer.Option(
            "--gpus-per-cell",
            metavar="G",
            help="With --ray: GPUs a cell asks for (a fraction shares one GPU between cells).",
        ),
    ] = 0.0,
    no_cache: NoCacheOption = False,
) -> None:
    """Train and measure every cell of a study file, each a run folder of the study."""
    from jabcli.api import plots
    from jabcli.cli.display import commands, console, say
    from jabcli.cli.live import StudyView
    from jabcli.cli.tables import study_table
    from jabcli.studies import studies, study_run

    if ray is None and (cpus_per_cell != 1.0 or gpus_per_cell != 0.0):
        raise JabError("--cpus-per-cell and --gpus-per-cell go with --ray")
    if ray is not None and workers is not None:
        raise JabError("--workers is for this machine; with --ray the cluster decides")
    found = studies.read(file)
    folder = out or Path("runs") / studies.slug(found.name)
    configure_jax(no_cache)
    if no_cache:
        os.environ["JAB_NO_CACHE"] = "1"  # the workers' too
    summary = study_run.run(found, folder, workers, StudyView(), ray, cpus_per_cell, gpus_per_cell)
    again = f"jab study run {shlex.quote(str(file))}" + (
        f" --out {shlex.quote(str(folder))}" if out is not None else ""
    )
    if summary.interrupted_by is not None:
        say(
            f"Interrupted: {len(summary.measured)} of {len(found.cells)} cells measured; "
            f"checkpoints kept in {folder}"
        )
        commands("Resume with:", [again])
        raise typer.Exit(128 + summary.interrupted_by)
    console.print(study_table(studies.table(folder)))
    if summary.failed:
        for name, error in summary.failed.items():
            print(f"jab: error: cell {name!r} failed: {error}", file=sys.stderr)
        print(
            f"jab: error: {len(summary.failed)} of {len(found.cells)} cells failed "
            f"(logs in {folder / studies.LOGS}); after a fix, run again: {again}",
            file=sys.stderr,
        )
        raise typer.Exit(1)
    picture = "svg" if plots.available() else "html"  # without matplotlib, the terminal's
    commands(
        "Next:",
        [
            f"jab study show {shlex.quote(str(folder))} --save study.{picture}",
            f"jab runs {shlex.quote(str(folder))}",
        ],
    )


@study_app.command("show", cls=Command)
def study_show_command(
    folder: Annotated[
        Path, typer.Argument(metavar="DIR", help="A study folder (made by jab study run).")
    ],
    as_json: JsonOption = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the table as Markdown, for a README.")
    ] = False,
    metric: Annotated[
        str,
        typer.Option(
            "--metric",
            help="What the table shows per bin: seq_acc (exact match), token_acc (answer "
            "tokens and <eos>), symbol_acc (per-symbol accuracy of the answers as written) or "
            "forced_symbol_acc (per-symbol accuracy at the answer's true length, the score of "
            "Delétang et al. 2023; for studies measured with evaluate.force_length).",
        ),
    ] = "seq_acc",
    save: Annotated[
        Path | None,
        typer.Option(
            "--save",
            metavar="FILE.svg|FILE.png|FILE.html",
            help="Also write the plot to a file: .svg or .png drawn by matplotlib (pip install "
            "'jab\\[plots]'), .html as the terminal draws it.",
        ),
    ] = None,
    bins: Annotated[
        str | None,
        typer.Option(
            "--bins",
            metavar="A-B,C-D",
            help="Group the lengths measured into these bins instead of the study file's "
            "(e.g. 1-40,41-500); nothing is measured again.",
        ),
    ] = None,
) -> None:
    """Show a study's table (cells x lengths) and its plot of exact match by length."""
    from jabcli.api.formatting import STUDY_METRICS, study_markdown
    from jabcli.cli.display import console, say
    from jabcli.cli.pictures import show_picture, study_curves
    from jabcli.cli.tables import study_table
    from jabcli.studies import studies

    if as_json and markdown:
        raise JabError("give either --json or --markdown, not both")
    if metric not in STUDY_METRICS:
        raise JabError(
            f"--metric must be one of {', '.join(STUDY_METRICS)}, got {metric!r}"
            f"{suggest(metric, STUDY_METRICS)}"
        )
    check_save(save, PLOT_FILES)
    results = {**studies.table(folder, bins), "metric": metric}
    if metric.startswith("forced_") and not results["force_length"]:
        raise JabError(
            f"--metric {metric} needs answers decoded at their true length: {folder} was "
            "measured without evaluate.force_length: true"
        )
    if as_json:
        print(json.dumps(results))
    elif markdown:
        print(study_markdown(results))
    else:
        console.print(study_table(results))
        if any(c["state"] == "measured" for c in results["cells"]):
            show_picture(study_curves(results))
    if save is not None:
        save_plot(study_curves(results), save)
        if not (as_json or markdown):  # stdout is the table's alone
            say(f"Saved {save}")


def stdin_lines() -> list[tuple[int, str]]:
    """The non-blank lines of stdin with their line numbers, read as UTF-8 (a byte-order
    mark, as some editors write, is dropped, as file tasks drop it)."""
    data = sys.stdin.buffer.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise JabError(
            f"stdin is not UTF-8 text (line {line} has the byte {data[err.start]:#04x})"
        ) from None
    return [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]


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
        raise JabError(
            f"--save {save} needs matplotlib: pip install 'jab[plots]' (or save .html, the "
            "terminal's drawing)"
        )


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors become one line on stderr and exit code 2."""
    args = list(sys.argv[1:] if argv is None else argv)
    sys.stdout = QuietStdout(sys.stdout)  # print() too, before Click turns EPIPE into exit 1
    cli = typer.main.get_command(app)
    quiet_broken_pipes()  # Typer's help console too
    try:
        with notes_on_stderr():
            code = cli.main(args, prog_name="jab", standalone_mode=False)
    except JabError as err:
        if os.environ.get("JAB_DEBUG"):
            raise
        fail(str(err))
    except typer.Exit as err:
        sys.exit(err.exit_code)
    except BrokenPipeError:  # `jab tasks | head -1`: the reader has all it wanted
        reader_gone()
        sys.exit(0)
    except (typer.Abort, KeyboardInterrupt):
        interrupted()
    except NoArgsIsHelpError as err:
        print(err.format_message())
        sys.exit(0)
    except ClickException as err:
        ctx = getattr(err, "ctx", None)
        where = ctx.command_path if ctx is not None and ctx.parent is not None else None
        where = where or named_command(cli, args)  # an option's missing value: no ctx
        message = plain_words(err.format_message())
        if isinstance(err, NoSuchOption) and ctx is not None:  # Click's guesses are too wild
            message = err.message + close_option(err.option_name, ctx)
        fail(f"{message} (see '{where} --help')")
    except Exception as err:
        if "RESOURCE_EXHAUSTED" not in str(err) or os.environ.get("JAB_DEBUG"):
            raise
        fail(f"out of memory: {str(err).splitlines()[0][:300]}", code=1)
    sys.exit(code if isinstance(code, int) else 0)


def named_command(cli, args: list[str]) -> str:
    """'jab study run' for `jab study run s.yaml --ray`: the commands that args name."""
    path, group = ["jab"], cli
    for arg in args:
        sub = getattr(group, "commands", {}).get(arg)
        if sub is None:
            break
        path.append(arg)
        group = sub
    return " ".join(path)


@contextlib.contextmanager
def notes_on_stderr():
    """Each `Note` the library warns of (a damaged checkpoint passed over, a manifest
    rebuilt) as one line on stderr, as it comes; other warnings as Python shows them."""
    with warnings.catch_warnings():
        warnings.simplefilter("always", Note)  # the same note about two runs: both said
        shown = warnings.showwarning

        def show(message, category, *where, **more) -> None:
            if issubclass(category, Note):
                print(f"jab: note: {' '.join(str(message).split())}", file=sys.stderr)
            else:
                shown(message, category, *where, **more)

        warnings.showwarning = show
        yield


def fail(message: str, code: int = 2) -> None:
    print(f"jab: error: {' '.join(message.split())}", file=sys.stderr)
    sys.exit(code)
