"""The `jab` command line: the I/O layer. Commands parse, call library code (session,
inspection), print through display.py and choose exit codes; nothing else in jab prints
or exits.

JAX is imported inside the commands that need it, so `jab --help` starts instantly.
"""

from __future__ import annotations

import enum
import json
import os
import signal
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from jabcli.errors import JabError

try:  # Typer >= 0.20 ships its own copy of Click
    from typer._click.exceptions import ClickException, NoArgsIsHelpError
except ImportError:  # pragma: no cover - older Typer depends on Click itself
    from click.exceptions import ClickException, NoArgsIsHelpError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Train small Transformers on algorithmic toy tasks and look at what they learned.",
)

SEED_MAX = 2**32 - 1
SAMPLES_PER_LENGTH = 200

RunOption = Annotated[
    Optional[Path], typer.Option("--run", help="Run folder (default: the newest under runs/).")
]
CheckpointOption = Annotated[
    str, typer.Option("--checkpoint", help="Which checkpoint: best, latest or a step number.")
]
NoCacheOption = Annotated[
    bool, typer.Option("--no-cache", help="Do not use the persistent compilation cache.")
]
StepsOption = Annotated[
    Optional[int],
    typer.Option("--steps", min=1, help="Number of training steps (overrides train.steps)."),
]
SeedOption = Annotated[
    int, typer.Option("--seed", min=0, max=SEED_MAX, help="Seed of the held-out sample.")
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print one JSON object instead of tables.")
]
LengthsOption = Annotated[
    Optional[str],
    typer.Option(
        "--lengths",
        help="Evaluate --samples inputs at every length in A-B (e.g. 1-64), "
        "including lengths beyond training.",
        metavar="A-B",
    ),
]


class Kind(str, enum.Enum):
    cross = "cross"
    encoder = "encoder"
    decoder = "decoder"


def configure_jax(no_cache: bool) -> None:
    from jabcli import runtime

    runtime.configure(no_cache)


@app.command("tasks")
def tasks_command(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON list instead of a table.")
    ] = False,
) -> None:
    """List the built-in tasks."""
    from jabcli import config
    from jabcli.display import console
    from jabcli.experiment import resolve
    from jabcli.tasks import TASKS

    rows = []
    for name, task in TASKS.items():
        preset = resolve(name).config if name in config.preset_names() else None
        rows.append(
            {
                "name": name,
                "description": task.description,
                "alphabet": preset.task.alphabet if preset else task.default_alphabet,
                "min_len": preset.task.min_len if preset else None,
                "max_len": preset.task.max_len if preset else None,
            }
        )
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    from rich.table import Table

    table = Table(title="Built-in tasks", title_justify="left")
    for column in ("name", "description", "alphabet", "lengths"):
        table.add_column(column)
    for r in rows:
        table.add_row(r["name"], r["description"], r["alphabet"], f"{r['min_len']}-{r['max_len']}")
    console.print(table)
    console.print("Train one with: jab train --task NAME")
    console.print("Or on your own input/output pairs: jab train --task file:PAIRS.tsv (or .jsonl)")


@app.command()
def train(
    task: Annotated[
        Optional[str],
        typer.Option(
            "--task", help="A built-in task name, a task YAML file, or file:PATH (pairs)."
        ),
    ] = None,
    config_file: Annotated[
        Optional[Path], typer.Option("--config", help="A YAML config layered over the task preset.")
    ] = None,
    sets: Annotated[
        Optional[list[str]],
        typer.Option("--set", help="Override a config key: --set model.d_model=128 (repeatable)."),
    ] = None,
    steps: StepsOption = None,
    seed: Annotated[
        Optional[int],
        typer.Option("--seed", min=0, max=SEED_MAX, help="Random seed (overrides train.seed)."),
    ] = None,
    seeds: Annotated[
        Optional[int],
        typer.Option(
            "--seeds",
            min=1,
            help="Train N models side by side, seeds SEED..SEED+N-1, into one group folder "
            "with a run per seed (overrides train.seeds).",
        ),
    ] = None,
    out: Annotated[
        Optional[Path],
        typer.Option("--out", help="Run folder to create (default: runs/<task>-<timestamp>)."),
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
        Optional[Path], typer.Argument(help="With --resume: the run to continue.")
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
    from jabcli import session
    from jabcli.display import TrainView

    configure_jax(no_cache)
    from jabcli.experiment import resolve

    experiment = resolve(task, config_file, sets, steps, seed, seeds)
    finish(lambda: session.start(experiment, out, TrainView()))


@app.command("resume")
def resume_command(
    run: Annotated[
        Optional[Path], typer.Argument(help="Run folder (default: the newest under runs/).")
    ] = None,
    steps: Annotated[
        Optional[int],
        typer.Option("--steps", min=1, help="Train up to this step (saved in the run)."),
    ] = None,
    no_cache: NoCacheOption = False,
) -> None:
    """Continue a run from its newest valid checkpoint, with its saved config."""
    from jabcli import session
    from jabcli.display import TrainView

    configure_jax(no_cache)
    finish(lambda: session.resume(run, steps, TrainView()))


def finish(training) -> None:
    """Train, then say how training ended; an interrupted run exits with 128 + the signal."""
    from jabcli.display import console, summary
    from jabcli.session import Interrupted

    try:
        outcome = training()
    except Interrupted as err:  # before Typer turns it into a silent exit
        interrupted(err.message)
    path = outcome.path
    if outcome.interrupted_by is not None:
        console.print(f"Interrupted at step {outcome.step}; checkpoint saved in {path}")
        console.print(f"Resume with: jab train --resume {path}")
        raise typer.Exit(128 + outcome.interrupted_by)
    console.print()
    console.print(summary(outcome))
    console.print(f"Next: jab eval --run {path}   |   jab show-attention --run {path}")


@app.command("eval")
def eval_command(
    run: RunOption = None,
    samples: Annotated[
        Optional[int],
        typer.Option(
            "--samples",
            min=1,
            help="Held-out inputs to decode (default 1000; per length with --lengths: 200).",
        ),
    ] = None,
    lengths: LengthsOption = None,
    min_len: Annotated[
        Optional[int],
        typer.Option("--min-len", min=1, help="Shortest input (default: the run's)."),
    ] = None,
    max_len: Annotated[
        Optional[int],
        typer.Option("--max-len", min=1, help="Longest input (default: the run's)."),
    ] = None,
    checkpoint: CheckpointOption = "latest",
    seed: SeedOption = 1,
    as_json: JsonOption = False,
    no_cache: NoCacheOption = False,
) -> None:
    """Measure a run on fresh held-out data: accuracy overall and by length."""
    from jabcli import inspection
    from jabcli.display import console, eval_report

    if lengths is not None and (min_len is not None or max_len is not None):
        raise JabError("give either --lengths A-B or --min-len/--max-len, not both")
    each_length = lengths is not None
    if each_length:
        min_len, max_len = inspection.parse_lengths(lengths)
        samples = SAMPLES_PER_LENGTH if samples is None else samples
    configure_jax(no_cache)
    loaded = inspection.load(run, checkpoint)
    result = inspection.evaluate_run(
        loaded, 1000 if samples is None else samples, min_len, max_len, seed, each_length
    )
    if as_json:
        print(
            json.dumps(
                {k: v for k, v in result.items() if k != "examples"}
                | {"mistakes": [e for e in result["examples"] if not e["correct"]][:20]}
            )
        )
        return
    t = loaded.experiment.config.task
    console.print(eval_report(result, str(loaded.run.path), (t.min_len, t.max_len)))


@app.command()
def compare(
    runs: Annotated[list[Path], typer.Argument(help="Two or more run folders.")],
    lengths: Annotated[
        Optional[str],
        typer.Option(
            "--lengths",
            help="Lengths to compare at, A-B (default: from the shortest training length "
            "to twice the longest, as far as every run's positions allow).",
            metavar="A-B",
        ),
    ] = None,
    samples: Annotated[
        int, typer.Option("--samples", min=1, help="Held-out inputs per length and run.")
    ] = SAMPLES_PER_LENGTH,
    checkpoint: CheckpointOption = "latest",
    seed: SeedOption = 1,
    as_json: JsonOption = False,
    no_cache: NoCacheOption = False,
) -> None:
    """Put several runs' accuracy at each input length side by side."""
    from jabcli import inspection
    from jabcli.display import comparison, console

    if len(runs) < 2:
        raise JabError("compare takes two or more run folders")
    bounds = inspection.parse_lengths(lengths) if lengths is not None else None
    configure_jax(no_cache)
    loaded = [inspection.load(run, checkpoint) for run in runs]
    if bounds is None:
        bounds = inspection.default_lengths(loaded)
    results = [
        inspection.evaluate_run(one, samples, *bounds, seed, each_length=True) for one in loaded
    ]
    if as_json:
        print(json.dumps([{k: v for k, v in r.items() if k != "examples"} for r in results]))
        return
    console.print(comparison(results))


@app.command()
def predict(
    texts: Annotated[
        list[str], typer.Argument(help="Inputs to answer, e.g. 12345 (spaces are ignored).")
    ],
    run: RunOption = None,
    checkpoint: CheckpointOption = "latest",
    no_cache: NoCacheOption = False,
) -> None:
    """Answer each input and mark it against the task's reference answer."""
    from jabcli import inspection
    from jabcli.display import console, predictions

    configure_jax(no_cache)
    loaded = inspection.load(run, checkpoint)
    console.print(predictions(inspection.predict(loaded, texts)))


@app.command("show-attention")
def show_attention(
    run: RunOption = None,
    input_text: Annotated[
        Optional[str],
        typer.Option("--input", help="Input to decode (default: a random held-out one)."),
    ] = None,
    kind: Annotated[Kind, typer.Option("--kind", help="Which attention to draw.")] = Kind.cross,
    layer: Annotated[
        int, typer.Option("--layer", help="Layer index; negative counts from the last.")
    ] = -1,
    head: Annotated[
        Optional[str],
        typer.Option("--head", help="Head index or 'mean' (default: all heads side by side)."),
    ] = None,
    save: Annotated[
        Optional[Path],
        typer.Option("--save", help="Also write the picture to FILE.svg or FILE.html."),
    ] = None,
    checkpoint: CheckpointOption = "latest",
    no_cache: NoCacheOption = False,
) -> None:
    """Draw what the model attends to while answering one input."""
    from jabcli import inspection
    from jabcli.display import attention_view, console, save_picture

    if save is not None and save.suffix.lower() not in (".svg", ".html"):
        raise JabError(f"--save writes .svg or .html files, got {str(save)!r}")
    if save is not None and not save.parent.is_dir():
        raise JabError(f"cannot save to {save}: folder {save.parent} does not exist")
    configure_jax(no_cache)
    loaded = inspection.load(run, checkpoint)
    m = loaded.experiment.config.model
    if not -m.num_layers <= layer < m.num_layers:
        raise JabError(
            f"--layer must be between 0 and {m.num_layers - 1} (or -1 for the last), got {layer}"
        )
    if head not in (None, "mean") and not (head.isdigit() and int(head) < m.num_heads):
        raise JabError(
            f"--head must be 'mean' or a head between 0 and {m.num_heads - 1}, got {head!r}"
        )
    picture = inspection.attention(loaded, input_text, kind.value)
    layer = layer % m.num_layers
    view = attention_view(picture, layer, head, str(loaded.run.path))
    console.print(view)
    if save is not None:
        heads = 1 if head is not None else m.num_heads
        save_picture(view, 40 + 2 * len(picture.cols) * heads, save)
        console.print(f"Saved {save}")


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors become one line on stderr and exit code 2."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = typer.main.get_command(app)
    try:
        code = command.main(args, prog_name="jab", standalone_mode=False)
    except JabError as err:
        if os.environ.get("JAB_DEBUG"):
            raise
        fail(str(err))
    except typer.Exit as err:
        sys.exit(err.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        interrupted()
    except NoArgsIsHelpError as err:
        print(err.format_message())
        sys.exit(0)
    except ClickException as err:
        ctx = getattr(err, "ctx", None)
        where = f"jab {ctx.info_name}" if ctx is not None and ctx.parent is not None else "jab"
        fail(f"{err.format_message()} (see '{where} --help')")
    except Exception as err:
        if "RESOURCE_EXHAUSTED" not in str(err) or os.environ.get("JAB_DEBUG"):
            raise
        fail(f"out of memory: {str(err).splitlines()[0][:300]}", code=1)
    sys.exit(code if isinstance(code, int) else 0)


def interrupted(said: str = "") -> None:
    """Exit 130 at once, saying what became of the run: not through sys.exit, whose exit
    handlers would wait for (or crash on) a computation still running."""
    sys.stdout.flush()
    print(f"jab: error: {'interrupted; ' + said if said else 'interrupted'}", file=sys.stderr)
    sys.stderr.flush()
    os._exit(128 + signal.SIGINT)


def fail(message: str, code: int = 2) -> None:
    print(f"jab: error: {' '.join(message.split())}", file=sys.stderr)
    sys.exit(code)
