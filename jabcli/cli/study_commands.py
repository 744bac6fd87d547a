"""`jab study run` and `jab study show`: a study's cells trained and measured, drawn live
by the terminal's `StudyView`; its table and plot of exact match by length.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from jabcli.cli.options import (
    PLOT_FILES,
    JsonOption,
    NoCacheOption,
    PlotSaveOption,
    check_save,
    configure_jax,
    save_plot,
)
from jabcli.core.errors import JabError, install, suggest

if TYPE_CHECKING:
    from jabcli.studies.study_results import StudyTable


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
            f"needs {install('ray')}.",
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
    from jabcli.studies import run_options, studies, study_file, study_results, study_run

    run_options.check_backend(workers, ray, cpus_per_cell, gpus_per_cell, run_options.flag)
    found = study_file.read(file)
    folder = out or run_options.default_folder(found)
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
    console.print(study_table(study_results.table(folder)))
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
    save: PlotSaveOption = None,
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
    from jabcli.studies import study_results

    if as_json and markdown:
        raise JabError("give either --json or --markdown, not both")
    shown = next((name for name in STUDY_METRICS if name == metric), None)
    if shown is None:
        raise JabError(
            f"--metric must be one of {', '.join(STUDY_METRICS)}, got {metric!r}"
            f"{suggest(metric, STUDY_METRICS)}"
        )
    check_save(save, PLOT_FILES)
    results: StudyTable = {**study_results.table(folder, bins), "metric": shown}
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
