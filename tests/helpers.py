"""Small real programs and suites for verdict tests."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from orchard.bench.sandbox.confinement import SCRATCH
from orchard.bench.sandbox.own_timing import COMPILERS

ORCHARD = [sys.executable, "-m", "orchard"]


needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind not installed")


# Hidden in a test's own sandbox, as in every measured run's (`SCRATCH`): other tests' side sandboxes bind their sockets
# under /tmp, and a sandbox that can see /tmp covers each; one removed between the listing of the host's sockets and
# bwrap's mount over it failed the sandbox ("Can't mkdir parents for /tmp/tmp.*/s0", a fast tier).
SYSTEM_TMP = tuple(Path(place) for place in SCRATCH)


def slow_but(values: Sequence[object], *fast: object) -> list[Any]:
    """Parameters for an end-to-end test: those in `fast` run in the fast tier, the others only in the slow one."""
    return [pytest.param(value, marks=() if value in fast else pytest.mark.slow) for value in values]


def session_lock_file(factory: pytest.TempPathFactory) -> Path:
    """The measurement lock of the whole test run: one real flock, never the user's machine-wide one.

    Under pytest-xdist every worker has its own temp dir inside the run's; the lock sits in the run's,
    so measured runs of tests in different workers still take turns (`ORCHARD_TEST_LOCK_DIR` moves it)."""
    if "ORCHARD_TEST_LOCK_DIR" in os.environ:
        return Path(os.environ["ORCHARD_TEST_LOCK_DIR"]) / "orchard-test.lock"
    run = factory.getbasetemp()
    return (run.parent if os.environ.get("PYTEST_XDIST_WORKER") else run) / "orchard-test.lock"


def path_without_compiler(monkeypatch: pytest.MonkeyPatch, directory: Path) -> None:
    """PATH as a machine without a C compiler has it: every command of today's PATH, linked into `directory`,
    but the compilers orchard would build its timer with."""
    directory.mkdir(mode=0o755)
    for entry in os.environ["PATH"].split(os.pathsep):
        for command in sorted(Path(entry).iterdir()) if Path(entry).is_dir() else ():
            link = directory / command.name
            if command.name not in COMPILERS and not link.is_symlink() and os.access(command, os.X_OK):
                link.symlink_to(command)
    monkeypatch.setenv("PATH", str(directory))
    assert not any(shutil.which(name) for name in COMPILERS)


@contextlib.contextmanager
def unhidden_dir() -> Iterator[Path]:
    """A directory of this test's own outside every place a sandbox hides anyway (/tmp, home), 0700 as mkdtemp
    makes it (only root may enter it); removed afterwards. Skips where /srv cannot hold one."""
    try:
        directory = Path(tempfile.mkdtemp(prefix=f"orchard-t-{os.getpid()}-", dir="/srv"))
    except OSError as error:
        pytest.skip(f"cannot make a directory in /srv: {error}")
    try:
        yield directory
    finally:
        shutil.rmtree(directory)


LOOP = """#!/bin/sh
i=0
while [ $i -lt {iterations} ]; do i=$((i+1)); done
{output}
exit {code}
"""


def make_binary(
    directory: Path,
    name: str,
    iterations: int = 15000,
    output: str = 'echo "count 15000"; echo "fact: alpha"',
    code: int = 0,
) -> Path:
    """An executable whose run time scales with `iterations`."""
    path = directory / name
    path.write_text(LOOP.format(iterations=iterations, output=output, code=code))
    path.chmod(0o755)
    return path


SUITE = """
[suite]
name = "loop"
runs = {runs}
min_runs = 8
calibration_runs = {calibration_runs}

[[scenario]]
name = "loop"
command = ["{{bin}}"]
expect = ["count 15000", "fact: alpha"]

[[metric]]
name = "wall_ms"
floor = 0.02

[[metric]]
name = "cpu_ms"
floor = 0.02

[[metric]]
name = "stdout_bytes"

[[gate]]
kind = "information_recall"

[[gate]]
kind = "determinism"
"""


def make_suite(directory: Path, runs: int = 20, calibration_runs: int = 20, text: str | None = None) -> Path:
    path = directory / "suite.toml"
    path.write_text(text if text is not None else SUITE.format(runs=runs, calibration_runs=calibration_runs))
    return path


def orchard(
    *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ORCHARD, *map(str, args)],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )
