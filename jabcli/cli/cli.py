"""The `jab` command line: the I/O layer. This module is its table of contents (every
command, in the order `jab --help` lists them, from the modules of its family) and its
entry point, `main`, which turns a user's mistake into one line on stderr and an exit
code. Commands parse, call library code, print through the terminal's modules
(display.py, live.py, tables.py, pictures.py) and choose exit codes; nothing else in jab
prints or exits.

JAX is imported inside the commands that need it, so `jab --help` starts instantly.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import warnings
from typing import Annotated, NoReturn

import typer

from jabcli import __version__
from jabcli.cli import picture_commands, run_commands, study_commands, train_commands
from jabcli.cli.interrupt import interrupted
from jabcli.cli.pipes import QuietStdout, reader_gone
from jabcli.cli.workarounds import (
    ClickException,
    Command,
    Group,
    close_option,
    plain_words,
    quiet_broken_pipes,
    unknown_option,
)
from jabcli.core.errors import JabError, Note

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


# Every command, in the order `jab --help` lists them.
command("tasks")(run_commands.tasks_command)
command("runs")(run_commands.runs_command)
command("train")(train_commands.train)
command("resume")(train_commands.resume_command)
command("eval")(run_commands.eval_command)
command("compare")(run_commands.compare)
command("predict")(run_commands.predict)
command("show-attention")(picture_commands.show_attention)
command("curves")(picture_commands.curves)
command("export")(run_commands.export)

study_app = typer.Typer(
    cls=Group,
    no_args_is_help=True,
    help="Ask a question of a grid of runs (tasks x encodings x seeds) at every length.",
)
app.add_typer(study_app, name="study")
study_app.command("run", cls=Command)(study_commands.study_run_command)
study_app.command("show", cls=Command)(study_commands.study_show_command)


@functools.cache
def click_command() -> Group:
    """The Click command Typer builds from `app`, once a process: building it reads every
    command's signature (20 ms), which a process that runs many commands, as the tests
    do, would otherwise pay at each."""
    built = typer.main.get_command(app)
    assert isinstance(built, Group)  # `app` is made with cls=Group
    return built


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors become one line on stderr and exit code 2."""
    args = list(sys.argv[1:] if argv is None else argv)
    sys.stdout = QuietStdout(sys.stdout)  # print() too, before Click turns EPIPE into exit 1
    cli = click_command()
    quiet_broken_pipes()  # Typer's help console too
    try:
        with notes_on_stderr():
            code = cli.main(args, prog_name="jab", standalone_mode=False)
    except JabError as err:
        if os.environ.get("JAB_DEBUG"):
            raise
        if hasattr(err, "shown"):  # raised in the user's own code: their traceback first
            print(err.shown, end="", file=sys.stderr)
        fail(str(err))
    except typer.Exit as err:
        sys.exit(err.exit_code)
    except BrokenPipeError:  # `jab tasks | head -1`: the reader has all it wanted
        reader_gone()
        sys.exit(0)
    except (typer.Abort, KeyboardInterrupt):
        interrupted()
    except ClickException as err:
        ctx = getattr(err, "ctx", None)
        where = ctx.command_path if ctx is not None and ctx.parent is not None else None
        where = where or named_command(cli, args)  # an option's missing value: no ctx
        message = plain_words(err.format_message())
        option = unknown_option(err)
        if option is not None and ctx is not None:  # Click's guesses are too wild
            message = err.message + close_option(option, ctx)
        fail(f"{message} (see '{where} --help')")
    except Exception as err:
        host = sys.modules.get("jabcli.tasks.host_answers")  # a task answered on the host
        failed = host.failure() if host is not None else None
        if failed is not None and not os.environ.get("JAB_DEBUG"):  # solve raised
            print(failed.shown, end="", file=sys.stderr)
            fail(str(failed))
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


def fail(message: str, code: int = 2) -> NoReturn:
    print(f"jab: error: {' '.join(message.split())}", file=sys.stderr)
    sys.exit(code)
