"""A measured run's numbers are the program's own, as the timer that starts it saw them.

Confined (issue 20): bubblewrap's set-up is not counted, nor forged. Before
the timer inside the sandbox, a confined run of `/bin/true` counted
bubblewrap's own CPU (about 15 ms here, against 1 ms unconfined), which
doubled the noise of a 20 ms workload. Unconfined (issue 24): the same
timer, so both paths measure the same interval; it was taken from Python
around the spawn, 1.54x `hyperfine -N`. The C timer is compiled once per
process, not once per verdict, and never taken from another process.
"""

from __future__ import annotations

import dataclasses
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from orchard.bench.measuring.measure import Observation, RunSpec, observe, workbench
from orchard.bench.sandbox import own_timing
from orchard.bench.sandbox.confinement import UNCONFINED, RunConfinement, confine_runs
from orchard.bench.suites.suite_reader import load_suite
from orchard.cache import CACHE_ENV
from tests.helpers import path_without_compiler

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
needs_cc = pytest.mark.skipif(not any(map(shutil.which, own_timing.COMPILERS)), reason="no C compiler here")

SUITE = '[suite]\nname = "own"\n\n[[scenario]]\nname = "run"\ncommand = ["{bin}"]\n\n[[metric]]\nname = "cpu_ms"\n'


CONFINED_OR_NOT = pytest.mark.parametrize("confined", [pytest.param(False, id="unconfined"),
                                                       pytest.param(True, id="confined", marks=needs_bwrap)])
SLEEPER = "#!/bin/sh\nsleep 0.05\n"


def _confinement(confined: bool, tmp_path: Path) -> RunConfinement:
    return confine_runs(True, reads=[tmp_path]) if confined else UNCONFINED


@pytest.fixture(params=["c", "python"])
def timer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """The C timer (a C compiler is here) or the Python one (none is)."""
    if request.param == "python":
        path_without_compiler(monkeypatch, tmp_path / "path")
    elif not any(map(shutil.which, own_timing.COMPILERS)):
        pytest.skip("no C compiler: only the Python timer runs here")
    return str(request.param)


def _runs(tmp_path: Path, binary: Path, confinement: RunConfinement, count: int) -> list[Observation]:
    (tmp_path / "suite.toml").write_text(SUITE)
    tmp_path.chmod(0o755)
    suite = load_suite(tmp_path / "suite.toml")
    with workbench(suite, confinement=confinement) as bench:
        return [observe(bench, suite.scenarios[0], binary, RunSpec("baseline", {"name": "b"}, run, {}, {"cpu_ms"}))
                for run in range(count)]


def _script(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bin" / "program"
    path.parent.mkdir(mode=0o755)
    path.write_text(text)
    path.chmod(0o755)
    return path


@needs_bwrap
def test_a_confined_run_of_true_does_not_count_the_sandboxs_set_up(tmp_path: Path) -> None:
    def cpu(confinement: RunConfinement) -> float:
        return statistics.median(o.values["cpu_ms"] or 0.0 for o in _runs(tmp_path, Path("/bin/true"),
                                                                            confinement, 5))

    unconfined, confined = cpu(UNCONFINED), cpu(confine_runs(True, reads=[tmp_path]))
    # bubblewrap's set-up alone is >10 ms of CPU here; /bin/true's own is about 1 ms either way
    assert confined < 2 * unconfined + 2.0, (confined, unconfined)


@needs_bwrap
@pytest.mark.parametrize("unprivileged", [True, False])
def test_the_program_cannot_reach_the_timers_report(tmp_path: Path, unprivileged: bool, timer: str) -> None:
    """It tries to write a 1 ns, 0 CPU report into every file its parent (the timer, PID 1) holds beyond stdio,
    failing its run when one opens; as the sandbox uid, and as orchard's own (the report file's owner)."""
    forger = _script(tmp_path, "#!/bin/sh\nfor fd in /proc/1/fd/*; do case $fd in */[012]) continue;; esac\n  "
                               "[ -e \"$fd\" ] && echo '1 0 0 0 0' >> \"$fd\" && exit 1\ndone 2>/dev/null\nsleep 0.3\n")
    confinement = dataclasses.replace(confine_runs(True, reads=[tmp_path]), unprivileged=unprivileged)
    (run,) = _runs(tmp_path, forger, confinement, 1)
    assert run.ok, run.failure
    assert (run.values["wall_ms"] or 0.0) >= 300.0, run.values


@CONFINED_OR_NOT
def test_exit_codes_and_peak_memory_are_the_programs(tmp_path: Path, timer: str, confined: bool) -> None:
    """Started by a process whose own peak is above the program's (a long-lived lab or test worker), the
    program's peak is still its own."""
    ballast = b"\1" * (200 << 20)
    program = _script(tmp_path, "#!/bin/sh\ndd if=/dev/zero of=/dev/null bs=80M count=1 2>/dev/null\nkill -XCPU $$\n")
    (run,) = _runs(tmp_path, program, _confinement(confined, tmp_path), 1)
    del ballast
    assert run.row["returncode"] == 128 + 24, run.row  # a signal, as a shell says it
    assert (run.row["peak_rss_bytes"] or 0) >= 80 << 20, run.row


@needs_cc
@CONFINED_OR_NOT
def test_confined_or_not_a_run_is_timed_by_the_c_timer(tmp_path: Path, confined: bool) -> None:
    (run,) = _runs(tmp_path, _script(tmp_path, SLEEPER), _confinement(confined, tmp_path), 1)
    assert run.ok, run.failure
    assert run.row["timed_by"] == own_timing.C_TIMER, run.row
    assert (run.values["wall_ms"] or 0.0) >= 50.0, run.values


@CONFINED_OR_NOT
def test_without_a_c_compiler_the_python_timer_times_the_run_and_the_row_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, confined: bool) -> None:
    path_without_compiler(monkeypatch, tmp_path / "path")
    (run,) = _runs(tmp_path, _script(tmp_path, SLEEPER), _confinement(confined, tmp_path), 1)
    assert run.ok, run.failure
    assert run.row["timed_by"] == "inside timer (Python: no C compiler (cc, gcc, clang) on PATH)", run.row
    assert (run.values["wall_ms"] or 0.0) >= 50.0, run.values


@needs_cc
def test_the_c_timer_is_compiled_once_for_two_verdicts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(own_timing, "_COMPILED", {})  # this process has compiled none yet
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    program = _script(tmp_path, SLEEPER)
    first = _runs(tmp_path, program, UNCONFINED, 2)
    (compiled,) = own_timing._COMPILED.values()
    before = compiled.stat()
    second = _runs(tmp_path, program, UNCONFINED, 2)
    assert list(own_timing._COMPILED.values()) == [compiled]
    assert (compiled.stat().st_ino, compiled.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert {run.row["timed_by"] for run in first + second} == {own_timing.C_TIMER}


FORGED = "#!/bin/sh\nfd=$1; shift; \"$@\"; echo 1 1 1 1 1 >&$fd\n"  # every program ran in 1 ns and 1 us of CPU


@needs_cc
def test_a_timer_left_in_the_cache_by_anything_else_is_never_used(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A timer kept for later processes could be swapped by anything run as the user meanwhile (a worker without
    a sandbox, an unconfined candidate): every later verdict would carry its numbers."""
    monkeypatch.setattr(own_timing, "_COMPILED", {}, raising=False)
    cache = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(cache))
    compiler = next(filter(None, map(shutil.which, own_timing.COMPILERS)))
    planted = [cache / "timer" / f"inside-timer-{own_timing._key(compiler)}",  # where one process left it for all
               cache / "timer" / "1-gone" / f"inside-timer-{own_timing._key(compiler)}"]  # another process's
    for path in planted:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(FORGED)
        path.chmod(0o755)
    runs = _runs(tmp_path, _script(tmp_path, SLEEPER), UNCONFINED, 2)
    assert all((run.values["wall_ms"] or 0.0) >= 50.0 for run in runs), [run.values for run in runs]
    assert {run.row["timed_by"] for run in runs} == {own_timing.C_TIMER}  # a timer of its own, not the Python one


@needs_cc
def test_a_process_removes_the_timer_it_compiled_when_it_exits(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    code = "from orchard.bench.sandbox.own_timing import inside_timer; print(inside_timer().argv[0])"
    compiled = Path(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                   timeout=120).stdout.strip())
    assert compiled.name.startswith("inside-timer-") and compiled.parent.parent == tmp_path / "cache" / "timer"
    assert not compiled.parent.exists()
