"""A confined run's own numbers: its wall time, CPU and peak memory as the timer inside its sandbox saw them.

Measured from outside, a confined run's `wait4` counts bubblewrap's own
set-up (namespaces, mounts: about 15 ms of CPU for a run of `/bin/true`
here, against 1 ms unconfined) and its wall time that set-up's latency, so
a small change in the program drowned in the sandbox's noise. The timer
(`inside_timer.py`) runs inside the sandbox, starts the program and reports
on a file only orchard holds; `OwnTiming.own` puts its numbers in the
run's capture. Its own start-up and bubblewrap's are outside the interval.
The timer is C (`inside_timer.c`), compiled once into each workbench when a
C compiler is here; otherwise the same timer in Python, whose start-up
(about 15 ms of CPU) the sandbox's per-run cost then carries.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from orchard import process

SCRIPT = Path(__file__).with_name("inside_timer.py")
SOURCE = Path(__file__).with_name("inside_timer.c")
COMPILED = "inside-timer"
COMPILE_TIMEOUT_S = 60
_FIELDS = 5


@dataclass(frozen=True)
class OwnTiming:
    """One run's report file (None: the run is not confined, its numbers are taken from outside)."""

    report: IO[bytes] | None = None
    timer: tuple[str, ...] = (sys.executable, "-I", "-S", str(SCRIPT))

    @property
    def reads(self) -> tuple[Path, ...]:
        """What the sandbox must be able to read to start the timer."""
        return () if self.report is None else (Path(self.timer[-1]),)

    @property
    def fds(self) -> tuple[int, ...]:
        """What the run's process must inherit: the report file's descriptor."""
        return () if self.report is None else (self.report.fileno(),)

    def command(self, argv: list[str]) -> list[str]:
        """`argv` started by the timer, which reports on the report file."""
        if self.report is None:
            return argv
        return [*self.timer, str(self.report.fileno()), *argv]

    def own(self, capture: process.Capture) -> process.Capture:
        """`capture` with the program's own wall time, CPU and peak RSS; without the timer's report (it never
        started the program, or the run timed out) its CPU and peak are unmeasured rather than the sandbox's."""
        if self.report is None:
            return capture
        self.report.seek(0)
        words = self.report.read(256).split()
        if len(words) != _FIELDS or not all(word.isdigit() for word in words):
            return dataclasses.replace(capture, cpu_ms=None, peak_rss_bytes=None)
        wall_ns, user_us, system_us, rss_kib, timer_rss_kib = map(int, words)
        return dataclasses.replace(capture, elapsed_ms=wall_ns / 1e6, cpu_ms=(user_us + system_us) / 1000.0,
                                   peak_rss_bytes=rss_kib * 1024 if rss_kib > timer_rss_kib else None)


FROM_OUTSIDE = OwnTiming()


@contextlib.contextmanager
def own_timing(confined: bool, directory: Path) -> Iterator[OwnTiming]:
    """A report file in `directory` (orchard's own, hidden from the run) for one confined run, and the timer
    (compiled into `directory` on its first run there, when a C compiler is here)."""
    if not confined:
        yield FROM_OUTSIDE
        return
    compiled = _compiled(directory)
    with tempfile.TemporaryFile(dir=directory) as report:
        yield OwnTiming(report) if compiled is None else OwnTiming(report, (str(compiled),))


def _compiled(directory: Path) -> Path | None:
    """The C timer in `directory`, compiled there once; None when no C compiler here can build it."""
    target = directory / COMPILED
    if target.exists():
        return target
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        return None
    building = directory / f".{COMPILED}.{os.getpid()}"
    built = subprocess.run([compiler, "-O2", "-o", str(building), str(SOURCE)], capture_output=True, check=False,
                           timeout=COMPILE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    if built.returncode != 0:
        building.unlink(missing_ok=True)
        return None
    building.chmod(0o755)
    building.replace(target)
    return target
