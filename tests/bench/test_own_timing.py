"""A confined run's numbers are the program's own (issue 20): bubblewrap's set-up is not counted, nor forged.

Before the timer inside the sandbox, a confined run of `/bin/true` counted
bubblewrap's own CPU (about 15 ms here, against 1 ms unconfined), which
doubled the noise of a 20 ms workload.
"""

from __future__ import annotations

import dataclasses
import shutil
import statistics
from pathlib import Path

import pytest

from orchard.bench import own_timing
from orchard.bench.confinement import UNCONFINED, RunConfinement, confine_runs
from orchard.bench.measure import Observation, RunSpec, observe, workbench
from orchard.bench.suite_reader import load_suite

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

SUITE = '[suite]\nname = "own"\n\n[[scenario]]\nname = "run"\ncommand = ["{bin}"]\n\n[[metric]]\nname = "cpu_ms"\n'


@pytest.fixture(params=["c", "python"])
def timer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The C timer (a C compiler is here) or the Python one (none is)."""
    if request.param == "python":
        monkeypatch.setattr(own_timing, "_compiled", lambda _directory: None)
    elif shutil.which("cc") is None:
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


def test_a_confined_run_of_true_does_not_count_the_sandboxs_set_up(tmp_path: Path) -> None:
    def cpu(confinement: RunConfinement) -> float:
        return statistics.median(o.values["cpu_ms"] or 0.0 for o in _runs(tmp_path, Path("/bin/true"),
                                                                            confinement, 5))

    unconfined, confined = cpu(UNCONFINED), cpu(confine_runs(True, reads=[tmp_path]))
    # bubblewrap's set-up alone is >10 ms of CPU here; /bin/true's own is about 1 ms either way
    assert confined < 2 * unconfined + 2.0, (confined, unconfined)


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


def test_exit_codes_and_peak_memory_are_the_programs(tmp_path: Path, timer: str) -> None:
    program = _script(tmp_path, "#!/bin/sh\ndd if=/dev/zero of=/dev/null bs=80M count=1 2>/dev/null\nkill -XCPU $$\n")
    (run,) = _runs(tmp_path, program, confine_runs(True, reads=[tmp_path]), 1)
    assert run.row["returncode"] == 128 + 24, run.row  # a signal, as a shell says it
    assert (run.row["peak_rss_bytes"] or 0) >= 80 << 20, run.row
