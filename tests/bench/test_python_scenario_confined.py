"""A `python` scenario runs its callable confined (issue 20): the binary it runs keeps no state between runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from orchard.bench.measuring.measure import RunSpec, observe, workbench
from orchard.bench.sandbox.confinement import UNCONFINED, RunConfinement, confine_runs
from orchard.bench.suites.suite_reader import load_suite

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

SUITE = ('[suite]\nname = "lane"\n\n[[scenario]]\nname = "lane"\nkind = "python"\ncallable = "lane:measure"\n\n'
         '[[metric]]\nname = "seen"\n')
# the lane runs the binary and reports how many runs it has seen: a count kept in $TMPDIR and $HOME shows 2, 3, ...
LANE = '''import subprocess
def measure(binary, workdir, run, fixtures):
    seen = int(subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout)
    return [{"operation": "lane", "seen": seen, "returncode": 0}]
'''
BINARY = ('#!/bin/sh\nn=$(cat "$TMPDIR/lane-runs" "$HOME/.lane-runs" 2>/dev/null | tail -n 1)\n'
          'n=$(( ${n:-0} + 1 ))\necho $n > "$TMPDIR/lane-runs"; echo $n > "$HOME/.lane-runs" 2>/dev/null; echo $n\n')


def _seen(tmp_path: Path, confinement: RunConfinement) -> list[float | None]:
    tmp_path.chmod(0o755)
    (tmp_path / "suite.toml").write_text(SUITE)
    (tmp_path / "lane.py").write_text(LANE)
    binary = tmp_path / "counter.sh"
    binary.write_text(BINARY)
    binary.chmod(0o755)
    suite = load_suite(tmp_path / "suite.toml")
    with workbench(suite, confinement=confinement) as bench:
        runs = [observe(bench, suite.scenarios[0], binary, RunSpec("candidate", {"name": "c"}, run, {}, {"seen"}))
                for run in range(3)]
    assert all(run.ok for run in runs), [run.failure for run in runs]
    return [run.values["seen"] for run in runs]


def test_a_python_scenarios_binary_keeps_no_state_confined(tmp_path: Path) -> None:
    assert _seen(tmp_path, confine_runs(True, reads=[tmp_path])) == [1.0, 1.0, 1.0]


def test_unconfined_the_same_binary_counts_its_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The attack is real: in orchard's own process (`confine = false`) the count carries over."""
    for name in ("HOME", "TMPDIR"):
        (tmp_path / name).mkdir()
        monkeypatch.setenv(name, str(tmp_path / name))
    assert _seen(tmp_path, UNCONFINED) == [1.0, 2.0, 3.0]
