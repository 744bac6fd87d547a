"""The commands that list and measure: `jab tasks`, `jab runs`, `jab eval`, `jab
compare`, `jab predict` and `jab export`. Each parses, calls the layers below (the API,
inspection, listing) and prints tables or JSON through tables.py.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from jabcli.cli.options import (
    SAMPLES_PER_LENGTH,
    CheckpointOption,
    GroupRunOption,
    JsonOption,
    LengthsOption,
    NoCacheOption,
    RunOption,
    SeedOption,
    all_runs,
    check_save,
    chosen_run,
    configure_jax,
    one_run,
    run_argument,
    run_folders,
    runs_argument,
    runs_option,
)
from jabcli.core.errors import JabError, install
from jabcli.core.lengths import length_range


def tasks_command(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON list instead of a table.")
    ] = False,
    new: Annotated[
        str | None,
        typer.Option(
            "--new",
            metavar="NAME",
            help="Write NAME.py, a task of your own to start from (it trains as it is).",
        ),
    ] = None,
) -> None:
    """List the built-in tasks, or start one of your own (--new)."""
    if new is not None:
        from jabcli.cli.display import commands, say
        from jabcli.tasks.template import class_name, write_template

        path = write_template(new)
        say(f"Wrote {path}, the task {new}: the input, its last symbol first (3141 -> 1314)")
        commands("Train it with:", [f"jab train --task {path}:{class_name(new)}"])
        return
    from jabcli.cli.display import commands, console, say
    from jabcli.cli.tables import TaskRow, task_table
    from jabcli.core.config import preset
    from jabcli.core.settings import TaskConfig
    from jabcli.tasks.derived import aligned
    from jabcli.tasks.registry import TASKS

    rows: list[TaskRow] = []
    for name, task in TASKS.items():
        defaults = {**TaskConfig().__dict__, **(preset(name) or {}).get("task", {})}
        rows.append(
            {
                "name": name,
                "description": task.description,
                "alphabet": defaults["alphabet"] or task().alphabet,
                "min_len": defaults["min_len"],
                "max_len": defaults["max_len"],
                "aligned": aligned(task()),
                "level": task.level or None,
            }
        )
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    console.print(task_table(rows))
    from jabcli.tasks.user_code import entry_points

    installed = entry_points()  # named, not imported: their code runs only when trained
    for name, point in installed.items():
        package = f" from {point.dist.name} {point.dist.version}" if point.dist else ""
        say(f"Installed task {name}: {point.value}{package} (entry point jab.tasks)")
    commands("Train one with:", ["jab train --task NAME"])
    commands(
        "Or on your own input/output pairs (.tsv or .jsonl):", ["jab train --task file:PAIRS.tsv"]
    )
    commands("Or your own task, a class in your own file:", ["jab train --task PATH.py:Class"])


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
    from jabcli.inspection.listing import listing, studies_in
    from jabcli.runs.runs import RUNS_DIR

    if root.exists() and not root.is_dir():
        raise JabError(f"{root} is a file, not a folder of runs")
    if not root.exists() and root != RUNS_DIR:  # runs/ is there once a run is trained
        raise JabError(f"{root} does not exist: no folder of runs there")
    rows, studies = listing(root), studies_in(root)
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    if rows:
        console.print(runs_table(rows))
    elif not studies:  # an empty list, as --json prints it: not an error
        say(f"No runs under {root}/; train one with: jab train --task reverse")
    if studies:
        names = ", ".join(str(path) for path in studies)
        say(
            f"{'Studies' if rows else 'No runs but studies'} under {root}/: {names} "
            f"(jab runs {studies[0]} lists a study's cells, jab study show {studies[0]} "
            "its results)"
        )


def eval_command(
    named: Annotated[Path | None, run_argument("Run folder or group of seeds")] = None,
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
    one = chosen_run(one_run(run, named))
    passes = len(open_runs(one.path)[1]) * (2 if force_length else 1)
    with decoding(passes):
        result = one.evaluate(
            (min_len, max_len),
            samples=samples,
            each_length=each_length,
            checkpoint=checkpoint,
            seed=seed,
            force_length=force_length,
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


def compare(
    runs: Annotated[
        list[Path] | None,
        runs_argument("Two or more run folders (a group of seeds counts as one)."),
    ] = None,
    runs_as_options: Annotated[list[Path] | None, runs_option()] = None,
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
            f"matplotlib ({install('plots')}).",
        ),
    ] = None,
    no_cache: NoCacheOption = False,
) -> None:
    """Put several runs' accuracy at each input length side by side."""
    from jabcli.api import api, plots
    from jabcli.cli.display import console, decoding, say
    from jabcli.cli.tables import comparison
    from jabcli.runs.runs import open_runs

    runs = all_runs(runs, runs_as_options, "two or more runs")
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

    folder = next((t for t in texts if t != "-" and is_run(t)), None)
    if folder is not None and run is None:  # jab predict RUN 123: the run is --run's
        raise JabError(f"{folder} is a folder, not an input; name a run with --run {folder}")
    lines = [(f"line {n}: ", line) for n, line in stdin_lines()] if "-" in texts else []
    given = [each for text in texts for each in (lines if text == "-" else [("", text)])]
    if not given:  # (where an input came from, for its error; the input)
        raise JabError("- reads inputs from stdin, one per line, but there were none")
    configure_jax(no_cache)
    answered = chosen_run(run).predict(
        [text for _, text in given], checkpoint=checkpoint, skip_bad=True
    )
    if answered:
        console.print(predictions(answered))
    for i, error in answered.skipped.items():  # after the table, where a reader sees them
        print(f"jab: error: {given[i][0]}{error}", file=sys.stderr)
    if answered.skipped:
        raise typer.Exit(2)


def is_run(text: str) -> bool:
    """Whether an argument names a run folder or a group (an input like `..` may name a
    folder, and is an input all the same)."""
    return any(os.path.isfile(os.path.join(text, name)) for name in ("config.yaml", "group.json"))


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


def export(
    folders: Annotated[
        list[Path] | None,
        runs_argument(
            "Runs, groups of seeds or studies whose metrics to export.", callback=run_folders
        ),
    ] = None,
    folders_as_options: Annotated[list[Path] | None, runs_option(callback=run_folders)] = None,
    tensorboard: Annotated[
        bool,
        typer.Option(
            "--tensorboard",
            help="Write each run's metrics.jsonl as TensorBoard event files in its folder, "
            f"replacing those written before ({install('tensorboard')}).",
        ),
    ] = False,
) -> None:
    """Write what runs logged to another tool's format (for runs without train.log_to).

    Given a study, every cell's."""
    from jabcli.cli.display import say
    from jabcli.runs import loggers
    from jabcli.runs.runs import open_runs, study_runs

    folders = all_runs(folders, folders_as_options, "the runs to export")
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
