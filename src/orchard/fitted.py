"""A table where it fits the width it is given, else the same rows stacked as short blocks.

Rich shrinks a table too wide for the terminal by cutting its cells (`dict-ide…`, `inconc…`): the very names a
reader needs. Deciding at render time, from the width the console offers, keeps an 80-column terminal, a pipe
and a resized `--watch` all whole. Bench and lab both print through it.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table

_UNBOUNDED = 10_000  # columns: a table's natural width is measured without the console's limit


class Fitted:
    """The tables, one after another, when each fits whole; else the blocks (each row stacked as a few lines)."""

    def __init__(self, tables: Sequence[Table], blocks: Sequence[RenderableType]) -> None:
        self.tables = tuple(tables)
        self.blocks = tuple(blocks)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        wide = options.update(max_width=_UNBOUNDED)
        if all(Measurement.get(console, wide, table).maximum <= options.max_width for table in self.tables):
            yield from self.tables
        else:
            yield from self.blocks
