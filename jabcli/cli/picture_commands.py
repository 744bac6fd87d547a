"""The commands that draw: `jab show-attention` (heatmaps) and `jab curves` (metrics by
step), in the terminal and, with `--save`, to a file (pictures.py, plots.py).
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

import typer

from jabcli.cli.options import (
    PLOT_FILES,
    CheckpointOption,
    NoCacheOption,
    PlotSaveOption,
    RunOption,
    all_runs,
    check_save,
    chosen_run,
    configure_jax,
    one_run,
    run_argument,
    runs_argument,
    runs_not_studies,
    runs_option,
    save_plot,
)
from jabcli.core.errors import JabError


class Kind(str, enum.Enum):
    cross = "cross"
    encoder = "encoder"
    decoder = "decoder"
    stack = "stack"
    tape = "tape"


def show_attention(
    named: Annotated[Path | None, run_argument("Run folder")] = None,
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
            metavar="cross|encoder|decoder|stack|tape",
            help="Which attention to draw (default: cross; a model.arch=encoder run has "
            "encoder only, a model.arch=decoder run decoder only); a stack_rnn or "
            "tape_rnn run draws its stack or tape instead.",
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
    """Draw what the model attends to, or its memory, while answering one input."""
    from jabcli.cli.display import say
    from jabcli.cli.pictures import attention_view, save_picture, show_picture

    check_save(save, (".svg", ".html"))
    configure_jax(no_cache)
    one = chosen_run(one_run(run, named))
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


def curves(
    runs: Annotated[
        list[Path] | None,
        runs_argument(
            "Runs or groups of seeds to draw, overlaid (a study among them is skipped).",
            callback=runs_not_studies,
        ),
    ] = None,
    runs_as_options: Annotated[list[Path] | None, runs_option(callback=runs_not_studies)] = None,
    metric: Annotated[
        str,
        typer.Option(
            "--metric",
            metavar="NAME",
            help="loss, token_acc, seq_acc (training batch), eval_token_acc, eval_seq_acc "
            "(held-out), lr or grad_norm.",
        ),
    ] = "loss",
    save: PlotSaveOption = None,
) -> None:
    """Draw how a metric moved during training, for one or several runs."""
    from jabcli.api import api
    from jabcli.api.plots import Plot
    from jabcli.cli.display import say
    from jabcli.cli.pictures import CurvesView, show_picture

    runs = all_runs(runs, runs_as_options, "the runs to draw")
    check_save(save, PLOT_FILES)
    view = CurvesView(Plot(api.curves(runs, metric)))
    show_picture(view)
    if save is not None:
        save_plot(view, save)
        say(f"Saved {save}")
