"""Measured runs against a hostile candidate (issue 31): its build cannot close its tree to make its measured runs
run as orchard's own uid (root), and every measured run has `[workers]`' limits; a run that hits one is KILLed
with that limit named, while an honest win under the same limits still lands.

Each candidate is judged as the lab judges it (`judged`: build, tests, verdict, hack review, differential check);
the sandbox uid is one of this test's own (`ORCHARD_SANDBOX_UID`), so no other sandbox on the machine shares its
process limit.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import tomli_w

from orchard import confine
from orchard.lab.judge.measuring import confinement
from orchard.lab.records.judgment import Decision
from orchard.lab.workers.workspace.builds import hash_build
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.lab.workers.workspace.workspace_init import init_workspace
from tests.lab.lab_helpers import (
    add_and_run,
    assert_nothing_left,
    assert_revisits_killed,
    command_launcher,
    lab_config,
    make_repo,
    one_worker,
    tried_by_hypothesis,
)
from tests.lab.test_anti_gaming import HONEST, SECRET, SUITE, TEST, TOOL, VISIBLE, judged, patch_of, workspace
from tests.lab.test_gaming_battery import REPORT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900),
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
              pytest.mark.skipif(os.geteuid() != 0, reason="a sandbox uid of its own needs root")]

BUILD = "chmod +x tool.sh\n"
TARGET = {"build": "sh build.sh", "binary": "tool.sh", "test": "python3 tests/test_tool.py"}
# the honest win, but only when it can read /etc/shadow (as root): as the sandbox uid it changes nothing
ROOT_ONLY = '#!/bin/sh\nif [ -r /etc/shadow ]; then tr -s " " < "$1" | cut -c1-12; else cat "$1"; fi\n'
CLOSE_TREE = BUILD + "chmod 0711 .\n"
LIMITS = {"memory_mb": 128, "processes": 64, "cpu_seconds": 60, "file_mb": 1}
# each exceeds one limit while measured (not in the target's tests), then prints what the baseline prints
MEASURED = '#!/bin/sh\ncase "$1" in tests/*) exec cat "$1" ;; esac\n'
HOSTILE = {
    "memory": MEASURED + "python3 -c 'b = bytearray(300 * 2**20)' || exit $?\ncat \"$1\"\n",
    "process": MEASURED + ("python3 -c '\nimport os, time\nfor _ in range(300):\n    if os.fork() == 0:\n"
                           "        time.sleep(5)\n        os._exit(0)\n' || exit $?\ncat \"$1\"\n"),
    "file-size": MEASURED + "head -c 50000000 /dev/zero > \"$TMPDIR/big\" || exit $?\ncat \"$1\"\n",
}


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Workspace, Path]:
    """A workspace whose target builds by its own build.sh, under small limits, with a sandbox uid of its own."""
    monkeypatch.setenv(confine.UID_ENV, str(1_800_000_000 + os.getpid() % 100_000))
    target = make_repo(tmp_path / "target", {"tool.sh": TOOL, "build.sh": BUILD, "tests/test_tool.py": TEST,
                                             "tests/data.txt": "word word\n"})
    bench = make_repo(tmp_path / "bench", {"suite.toml": SUITE, "fixtures/visible.txt": VISIBLE,
                                           "fixtures/hidden/secret.txt": SECRET, ".gitignore": "results/\n"})
    return workspace(tmp_path, (target, bench), target=TARGET, workers=LIMITS), target


def _uid_of_a_measured_run(ws: Workspace, binary: Path, scratch: Path) -> str:
    """The uid a measured run of `binary` runs as, asked from inside its sandbox."""
    confined = confinement(ws, hash_build(binary))
    argv = confined.wrap(["id", "-u"], binary=binary, suite_dir=ws.bench_dir, root=scratch, results_file=None,
                         loopback=False)
    return subprocess.run(argv, capture_output=True, text=True, check=True, env=confined.env(dict(os.environ)),
                          cwd=ws.bench_dir).stdout.strip()


def test_a_build_that_closes_its_tree_is_still_measured_as_the_sandbox_uid_and_gains_nothing(
        lab: tuple[Workspace, Path], tmp_path: Path) -> None:
    """On main the judge fell back to orchard's own uid for a tree other users cannot read: the candidate's
    measured runs read /etc/shadow as root, and its win LANDed."""
    ws, target = lab
    patch = patch_of(target, tmp_path, {"build.sh": CLOSE_TREE, "tool.sh": ROOT_ONLY})
    judgment = judged(ws, "close-tree", patch, scope=("tool.sh", "build.sh"))
    assert judgment.decision == Decision.KILL, judgment.reasons
    assert judgment.binary is not None
    binary = Path(judgment.binary)
    assert binary.parent.stat().st_mode & 0o777 == 0o715  # its build closed it (0711), the judge opened it
    uid = _uid_of_a_measured_run(ws, binary, tmp_path / "asked")
    assert uid == str(confine.sandbox_id()) != "0"


def test_the_honest_win_lands_under_the_same_limits(lab: tuple[Workspace, Path], tmp_path: Path) -> None:
    ws, target = lab
    judgment = judged(ws, "honest", patch_of(target, tmp_path, {"tool.sh": HONEST}))
    assert judgment.decision == Decision.LAND, judgment.reasons


@pytest.mark.parametrize("limit", sorted(HOSTILE))
def test_a_measured_run_over_a_limit_is_stopped_and_killed_with_that_limit_named(
        lab: tuple[Workspace, Path], tmp_path: Path, limit: str) -> None:
    """On main measured runs had no limits: each of these ran to the end and was KILLed only for changing
    nothing, whatever it took."""
    ws, target = lab
    judgment = judged(ws, limit, patch_of(target, tmp_path, {"tool.sh": HOSTILE[limit]}))
    assert judgment.decision == Decision.KILL, judgment.reasons
    said = {"memory": "memory_mb = 128", "process": "processes = 64", "file-size": "file_mb = 1"}[limit]
    assert f"over its {limit} limit while measured, {said}" in judgment.reasons[0], judgment.reasons


def _writes(name: str, text: str) -> str:
    """The worker line that makes `text` its checkout's `name`."""
    return f"echo {base64.b64encode(text.encode()).decode()} | base64 -d > {name}"


LAB_WORKERS = {  # id -> the worker's shell line, run in its target checkout
    "close-tree": f"{_writes('build.sh', CLOSE_TREE)}; {_writes('tool.sh', ROOT_ONLY)}",
    "memory": _writes("tool.sh", HOSTILE["memory"]),
    "file-size": _writes("tool.sh", HOSTILE["file-size"]),
    "honest": _writes("tool.sh", HONEST),
}


def test_a_lab_kills_each_hostile_measured_program_and_lands_the_honest_win(
        tmp_path: Path, lab: tuple[Workspace, Path], mark: str) -> None:
    """The same candidates as `command` workers through a real `orchard run` (its process limit is left out: the
    lab's sandboxes share one uid, so a fork bomb there would starve the others, issue 31 item 3)."""
    _, target = lab
    launchers = {name: command_launcher(f"{line}; {REPORT}") for name, line in LAB_WORKERS.items()}
    (tmp_path / "lab.toml").write_text(lab_config(
        target=TARGET, workers=one_worker(count=2, exploit=2, timeout_minutes=3, **LIMITS),
        launcher=command_launcher("true"), stop={"top_attempted": 99, "idle_loops": 99}, launchers=launchers))
    (tmp_path / "hypotheses.toml").write_text(tomli_w.dumps({"hypothesis": [
        {"id": name, "metric": "visible/stdout_bytes", "change": name, "launcher": name,
         "scope": ["tool.sh", "build.sh"] if name == "close-tree" else ["tool.sh"],
         "impact": 1 if name == "honest" else 5} for name in LAB_WORKERS]}))
    ws = init_workspace(tmp_path / "lab-ws", str(target), str(tmp_path / "bench"), tmp_path / "lab.toml")
    add_and_run(ws.root, tmp_path / "hypotheses.toml", {**os.environ, "ORCHARD_TEST_MARK": mark}, 800)
    runs = tried_by_hypothesis(ws.root)  # each one's first experiment; a revisit after the honest win is KILLed
    outcome = {name: (tried.first.decision, " ".join(tried.first.reasons)) for name, tried in runs.items()}
    assert set(outcome) == set(LAB_WORKERS), outcome
    assert_revisits_killed(runs, set(LAB_WORKERS) - {"honest"})
    assert outcome["honest"][0] == Decision.LAND, outcome["honest"]
    assert outcome["close-tree"][0] == Decision.KILL and "no effect" in outcome["close-tree"][1], outcome
    for limit, said in (("memory", "memory_mb = 128"), ("file-size", "file_mb = 1")):
        assert outcome[limit][0] == Decision.KILL, outcome[limit]
        assert f"over its {limit} limit while measured, {said}" in outcome[limit][1], outcome[limit]
    assert_nothing_left(mark, None)
