"""Where jab works around its command-line frameworks (Typer, Click under it, Rich), in one
place, each with why it is needed, so that a new Typer or Rich is checked here first:

- Click's exception classes, which jab catches to print one line, are reached from
  Typer's public `typer.BadParameter`: Typer 0.20 and later raise the exceptions of their
  own copy of Click, which they keep private (`typer._click`; the installed `click`, if
  another package brings one, is another copy whose classes do not match).
- `Command` and `Group` override Typer's help: no type after a flag, and a plain metavar
  for an argument, where Typer's Rich help would display its Python type. `Group` prints
  its help on stdout when given nothing (exit 0, as `--help` does), where Click raises an
  error.
- `quiet_broken_pipes` replaces Rich's exit on a closed stdout with an exception that
  `main` turns into exit 0.
- `plain_words` rewrites the pydantic messages Typer's option checks give, and
  `close_option` replaces Click's guess at a mistyped option.
"""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING, NoReturn

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

if TYPE_CHECKING:
    from rich.console import Console

    # To the type checker, the public class that Typer's copy of Click derives its
    # exceptions from: what jab reads of them (message, format_message) is declared there.
    UsageError = ClickException = typer.TyperException
else:
    # Click's documented hierarchy, BadParameter < UsageError < ClickException, from the
    # one class Typer exports: the classes of whichever copy of Click Typer raises from.
    UsageError = typer.BadParameter.__base__
    ClickException = UsageError.__base__

__all__ = [
    "ClickException",
    "Command",
    "Group",
    "close_option",
    "plain_words",
    "quiet_broken_pipes",
    "unknown_option",
]


class PlainHelp:
    """Help in the README's terms: nothing after a flag, `RUN...` for arguments (Typer
    would write `--json <bool>`, `runs... <list[Path]>` and `{runs}...`)."""

    def get_params(self, ctx):
        params = super().get_params(ctx)  # type: ignore[misc]  # the Typer class mixed in
        for param in params:
            if getattr(param, "is_flag", False):
                param.metavar = ""
            elif isinstance(param, TyperArgument):
                # Rich's help shows a type beside the metavar; a per-instance patch, as
                # Typer has no setting for it.
                param.display_type_rich = lambda ctx: None  # type: ignore[method-assign]
        return params


class Command(PlainHelp, TyperCommand):
    """A command whose usage line names its arguments by their metavars (`RUN...`), as the
    help does, not by Typer's parameter names."""

    def collect_usage_pieces(self, ctx) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []  # as Click's own
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                name = param.metavar or param.name.upper()
                pieces.append(name if param.required else f"[{name}]")
        return pieces


class Group(PlainHelp, TyperGroup):
    """`jab` and `jab study`: their help in the same terms as a command's; given nothing,
    their help on stdout and exit 0 (Click would raise its help as an error)."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            print(ctx.get_help())
            raise typer.Exit()
        return super().parse_args(ctx, args)


def quiet_broken_pipes() -> None:
    """Every Rich console, Typer's help console too, raises BrokenPipeError when stdout's
    reader goes away, instead of Rich's own exit 1 (`broken_pipe`)."""
    from rich.console import Console

    # mypy refuses any assignment to a method; replacing Rich's is the point here.
    Console.on_broken_pipe = broken_pipe  # type: ignore[method-assign]


def broken_pipe(self: Console) -> NoReturn:
    """`Console.on_broken_pipe`, replaced: Rich exits 1 when stdout's reader goes away;
    jab lets main() exit 0, as other Unix tools do (`jab tasks | head -1` under `set -o
    pipefail`)."""
    raise BrokenPipeError


# Typer checks option values with pydantic, whose words are a programmer's.
PLAIN_WORDS = (
    (r"^(Invalid value for [^:]+: )Value error, ", r"\1"),
    (r"\.$", ""),  # Click's sentences end in one; the help pointer follows
    (r"Input should be a valid integer.*", "expected a whole number"),
    (r"Input should be a valid number.*", "expected a number"),
    (r"Input should be greater than or equal to (\S+)", r"must be at least \1"),
    (r"Input should be less than or equal to (\S+)", r"must be at most \1"),
)


def plain_words(message: str) -> str:
    for pattern, words in PLAIN_WORDS:
        message = re.sub(pattern, words, message)
    return message


def unknown_option(err: Exception) -> str | None:
    """The option that Click's NoSuchOption names (the one Click error with guesses,
    `possibilities`; Typer does not export its class); None for any other error."""
    return getattr(err, "option_name", None) if hasattr(err, "possibilities") else None


def close_option(name: str, ctx) -> str:
    """' (did you mean '--task'?)' when one of the command's options is close to `name`,
    compared without the dashes (with them, '--lr' would be close to '--help'): Click's
    own guesses are too wild."""
    options = {
        opt.lstrip("-"): opt
        for param in ctx.command.get_params(ctx)
        for opt in param.opts
        if opt.startswith("--")
    }
    close = difflib.get_close_matches(name.lstrip("-"), list(options), n=1)
    return f" (did you mean {options[close[0]]!r}?)" if close else ""
