"""What the commands print through: a console that does not wrap into files and pipes, `--quiet`, and the
progress bar a measuring campaign or a lab reports to.

What they print is text, never rich markup: log lines quote config keys (`[workers] sandbox`) and workers'
own words, which rich would drop or fail on; and never a control character of those words (`visible`).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import click

from orchard.lab.text import visible

if TYPE_CHECKING:
    from types import TracebackType

    from rich.console import Console
    from rich.progress import TaskID


def terminal_console(stderr: bool = False) -> Console:
    """A rich console, on stderr if asked, that prints whole lines into files and pipes."""
    from rich.console import Console

    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal:
        console.width = 200  # files and pipes get whole lines, not wrapped cells
    return console


def is_quiet() -> bool:
    """Whether `orchard --quiet` was given."""
    context = click.get_current_context(silent=True)
    return bool(context and context.find_root().params.get("quiet"))


class ProgressBar:
    """A rich progress bar on stderr for a measuring campaign."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.quiet = is_quiet()
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=terminal_console(stderr=True), transient=True, disable=self.quiet,
        )
        self._task: TaskID | None = None
        self._lock = threading.Lock()  # the lab's judge threads report their campaigns at the same time

    def __enter__(self) -> ProgressBar:
        self._progress.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._progress.__exit__(kind, error, tb)

    def say(self, text: str) -> None:
        """A timestamped log line above the bar."""
        import time

        from rich.markup import escape

        if self.quiet:
            return
        self._progress.console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {escape(visible(text))}", highlight=False)

    def update(self, done: int, total: int, note: str = "") -> None:
        from rich.markup import escape

        with self._lock:
            if note and not self.quiet:
                self._progress.console.print(f"[dim]{escape(visible(note))}[/]")
            if self._task is None or (done == 0 and note):
                if self._task is not None:
                    self._progress.remove_task(self._task)
                self._task = self._progress.add_task("measuring pairs", total=total)
            self._progress.update(self._task, completed=done, total=total)

