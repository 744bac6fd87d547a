"""The terminal jab draws in with Rich: the one console, and the pieces every view and
table is built of (a title over a body, two columns of facts, a table that becomes lines
when the terminal is too narrow for it, a bar while held-out inputs are decoded). Shapes and
colours still read with NO_COLOR set.

Nothing a user typed or a model answered is ever cut to fit the terminal: long values
fold onto the next line, bars and charts shrink, and a heatmap too wide for the
terminal is drawn at its own width. The live views are in live.py, the tables of results
in tables.py, the pictures (heatmaps, curves, SVG and HTML files) in pictures.py.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.measure import Measurement
from rich.padding import Padding
from rich.progress import (
    BarColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from jabcli.cli.pipes import QuietStdout

# Rich asks for a typing.IO, a class that io.TextIOBase is not: it writes, flushes and asks
# isatty, fileno and encoding, which QuietStdout has.
console = Console(file=QuietStdout())  # type: ignore[arg-type]


def say(line: str) -> None:
    """Print `line` as is: paths and inputs are not Rich markup."""
    console.print(line, markup=False, highlight=False)


def live(renderable: RenderableType) -> Live:
    """A view redrawn in place. It leaves sys.stdout alone: jab prints through `console`,
    whose file writes to whatever sys.stdout is, so Rich's stdout redirection would send
    the console's own output back into itself, forever (a terminal only; pipes have no
    live view). Warnings on stderr still print above the view."""
    return Live(
        renderable, console=console, refresh_per_second=4, transient=False, redirect_stdout=False
    )


@contextlib.contextmanager
def decoding(passes: int, what: str = "decoding"):
    """A bar with ETA on stderr while held-out inputs are decoded in `passes` rounds of
    `decode.decode_rows` (a group's seeds, compared runs, forced lengths): shown in a
    terminal only, once decoding has taken more than a second, and gone when it ends."""
    from jabcli.evaluation.decode import reporting

    err = Console(stderr=True)
    if not err.is_terminal:
        yield
        return
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    )
    task = bar.add_task(what, total=passes)
    started, rounds, shown = time.monotonic(), -1, False

    def report(done: int, total: int) -> None:
        nonlocal rounds, shown
        rounds += done == 0
        bar.update(task, completed=min(passes, rounds + (done / total if total else 1)))
        if not shown and time.monotonic() - started > 1.0:
            bar.start()
            shown = True

    try:
        with reporting(report):
            yield
    finally:
        if shown:
            bar.stop()


def titled(title: str, body: RenderableType) -> Group:
    """A bold title line over `body` (a table's own title would wrap to the table's width)."""
    return Group(Text(title, style="bold"), body)


def facts(rows: list[tuple[str, str]]) -> Table:
    """Names and values, two columns; a long value folds rather than being cut."""
    table = Table(box=box.SIMPLE_HEAD, show_header=False)
    table.add_column("what", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    for name, value in rows:
        table.add_row(name, Text(value))  # plain text: a value like "[0-1]" is no markup
    return table


@dataclass
class Fitted:
    """A table when the width has room for every word of it, else `narrow`, the same
    figures as lines that wrap at spaces: nothing is cut, and no word is split.
    `folding`: the values of its columns that fold (inputs, answers: overflow="fold")
    may fold within their column, and only their headers' words need the room."""

    wide: Table
    narrow: RenderableType
    folding: bool = False

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        ranges = self.ranges(console)
        room = options.max_width - self.wide._extra_width
        least, most = sum(r[0] for r in ranges), sum(r[1] for r in ranges)
        if least > room:
            yield self.narrow
            return
        if most > room:  # Rich would squeeze columns below their longest word: share out
            spare = room - least
            slack = [high - low for low, high in ranges]
            for column, (low, _), give in zip(self.wide.columns, ranges, slack):
                column.width = low + spare * give // max(1, sum(slack)) - 2
        yield self.wide

    def ranges(self, console: Console) -> list[tuple[int, int]]:
        """Each column's narrowest width with no cell cut (a no_wrap column as wide as its
        widest cell, any other as its longest word, a folding one as its header's) and its
        widest, padding included."""
        options = console.options.update_width(10**4)
        found = []
        for column in self.wide.columns:
            sizes = [Measurement.get(console, options, c) for c in (column.header, *column.cells)]
            widest = max(m.maximum for m in sizes)
            if column.no_wrap:
                least = widest
            elif self.folding and column.overflow == "fold":
                least = sizes[0].minimum  # the header's longest word
            else:
                least = max(m.minimum for m in sizes)
            found.append((least + 2, widest + 2))  # the table's padding, a space each side
        return found


def lines(blocks: list[list[str]]) -> Group:
    """Blocks of lines, each block's first line bold and the rest indented, a blank line
    between blocks: the narrow layout of a table."""
    parts: list[Any] = []
    for first, *rest in blocks:
        parts.append(Text(first, style="bold"))
        parts += [Padding(Text(line), (0, 0, 0, 2)) for line in rest]
        parts.append(Text(""))
    return Group(*parts)


def commands(intro: str, lines: list[str]) -> None:
    """Commands to type next, each whole on a line of its own (never wrapped inside)."""
    say(intro)
    for line in lines:
        console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)


def round_ticks(low: int, high: int, most: int) -> list[int]:
    """Whole numbers from `low` to `high` for an axis's labels, at most `most` of them, a
    round step apart (1, 2 or 5 times a power of ten): 100 200 300, not 41 65 89 113."""
    step = 1
    while True:
        for size in (step, 2 * step, 5 * step):
            ticks = list(range(-(-low // size) * size, high + 1, size))
            if len(ticks) <= most:
                return ticks
        step *= 10
