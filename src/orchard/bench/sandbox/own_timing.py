"""A measured run's own numbers: its wall time, CPU and peak memory as a timer that starts it saw them.

Every measured run of a `command` or `rows` scenario, confined or not, is
started by the same small timer (`inside_timer.c`): it reads the clock,
starts the program, waits for it, reads the clock again and reports on a
file only orchard holds; `OwnTiming.own` puts its numbers in the run's
capture. Confined, it runs inside the sandbox, so bubblewrap's set-up
(namespaces, mounts: about 15 ms of CPU for a run of `/bin/true` here)
is outside the interval; unconfined, it leaves out what Python adds around a
spawn (the pidfd, the pipes: 1.54x `hyperfine -N` when the interval was
taken from Python, docs/benchmarks.md section 11). Both paths so measure the
same interval the same way.

The C timer is compiled once per process (a lab run, an `orchard verdict`),
not once per verdict, into a directory of that process's own under the
bench's cache (`cache.py`), removed when it exits. It is never shared
between processes: a timer kept for the next run could be replaced by
anything that ran as the user meanwhile (a worker with `sandbox = "none"`,
an unconfined candidate), and would then time every later verdict, a
sandboxed lab's too. Without a C compiler (or when it cannot build the timer) the
same timer in Python (`inside_timer.py`) runs instead, and the row's
`timed_by` says why: its start-up (about 15 ms of CPU) is outside the
recorded interval but each run's wall time carries it.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from orchard import process
from orchard.cache import cache_dir

SCRIPT = Path(__file__).with_name("inside_timer.py")
SOURCE = Path(__file__).with_name("inside_timer.c")
COMPILERS = ("cc", "gcc", "clang")
COMPILE_TIMEOUT_S = 60
C_TIMER = "inside timer (C)"
_FIELDS = 5


@dataclass(frozen=True)
class Timer:
    """The command line that starts a measured program under the timer, and how it times it (a row's `timed_by`)."""

    argv: tuple[str, ...]
    how: str


@dataclass(frozen=True)
class OwnTiming:
    """One run's report file and timer (no report: the run is timed from outside, as an instruction count is)."""

    report: IO[bytes] | None = None
    timer: Timer = Timer((), "from outside (Python around the process)")

    @property
    def reads(self) -> tuple[Path, ...]:
        """What a sandbox must be able to read to start the timer."""
        return () if self.report is None else (Path(self.timer.argv[-1]),)

    @property
    def fds(self) -> tuple[int, ...]:
        """What the run's process must inherit: the report file's descriptor."""
        return () if self.report is None else (self.report.fileno(),)

    def command(self, argv: list[str]) -> list[str]:
        """`argv` started by the timer, which reports on the report file."""
        if self.report is None:
            return argv
        return [*self.timer.argv, str(self.report.fileno()), *argv]

    def own(self, capture: process.Capture) -> process.Capture:
        """`capture` with the program's own wall time, CPU and peak RSS; without the timer's report (it never
        started the program, or the run timed out) its CPU and peak are unmeasured rather than the timer's."""
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
def own_timing(directory: Path) -> Iterator[OwnTiming]:
    """A report file in `directory` (orchard's own, hidden from a confined run) for one run, and its timer."""
    timer = inside_timer()
    with tempfile.TemporaryFile(dir=directory) as report:
        yield OwnTiming(report, timer)


_COMPILED: dict[tuple[str, Path], Path] = {}  # this process's programs, by the compiler and source of each
_COMPILING = threading.Lock()  # judge threads ask at once: one build


def inside_timer() -> Timer:
    """The C timer this process compiled (on its first use); the Python one, saying why, without it."""
    built = compiled(SOURCE, "inside-timer")
    return Timer((str(built),), C_TIMER) if isinstance(built, Path) else _python(built)


def compiled(source: Path, name: str, static: bool = False) -> Path | str:
    """`source` (a C program run by measured runs' sandboxes) compiled by this process on its first use, into a
    directory of its own removed at exit; or why it could not be. `static`: linked statically where the C library
    allows it (it starts about 0.2 ms sooner), else as usual."""
    compiler = next(filter(None, map(shutil.which, COMPILERS)), None)
    if compiler is None:
        return f"no C compiler ({', '.join(COMPILERS)}) on PATH"
    with _COMPILING:
        target = _COMPILED.get((compiler, source))
        if target is None or not target.exists():
            try:
                cache_dir("timer").mkdir(parents=True, exist_ok=True)
                own = Path(tempfile.mkdtemp(dir=cache_dir("timer"), prefix=f"{os.getpid()}-"))
            except OSError as error:
                return f"cannot write the compiled timer under {cache_dir('timer')}: {error.strerror}"
            own.chmod(0o755)  # the sandbox's uid runs it too; only this user writes here
            atexit.register(shutil.rmtree, own, True)
            target = own / f"{name}-{_key(compiler, source)}"
            failure = _compile(compiler, target, source, *(["-static"] if static else []))
            if failure is not None and static:
                failure = _compile(compiler, target, source)
            if failure is not None:
                return failure
            _COMPILED[compiler, source] = target
    return target


def _python(why: str) -> Timer:
    return Timer((sys.executable, "-I", "-S", str(SCRIPT)), f"inside timer (Python: {why})")


def _key(compiler: str, source: Path = SOURCE) -> str:
    """What a compiled program is made of, for its name: its source, the compiler (its real file, as installed)
    and the architecture (read once per process, when it is built, not on every run)."""
    real = Path(compiler).resolve()
    stat = real.stat()
    made_of = f"{real}\0{stat.st_size}\0{stat.st_mtime_ns}\0{platform.machine()}\0".encode()
    return hashlib.sha256(made_of + source.read_bytes()).hexdigest()[:16]


def _compile(compiler: str, target: Path, source: Path, *flags: str) -> str | None:
    """Build `source` at `target`. None when done, else why not."""
    try:
        built = subprocess.run([compiler, "-O2", *flags, "-o", str(target), str(source)], capture_output=True,
                               text=True, check=False, timeout=COMPILE_TIMEOUT_S, stdin=subprocess.DEVNULL)
        if built.returncode != 0:
            tail = built.stderr.strip().splitlines()[-1:] or [f"exit {built.returncode}"]
            return f"{Path(compiler).name} could not build it: {tail[0][:200]}"
        target.chmod(0o755)  # the sandbox's uid runs it too
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{Path(compiler).name} could not build it: {error}"
    return None
