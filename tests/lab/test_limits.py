"""Resource limits of workers and judge steps (issue 20): a memory hog, a fork bomb and a CPU spinner,
each run only inside tiny limits, are stopped by them; the same work inside the limits goes through."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from orchard.lab.db.state import LabState
from orchard.lab.judge.ladder import collection_checks
from orchard.lab.notebook import status, view
from orchard.lab.records.candidate import Flag
from orchard.lab.records.experiment import Experiment
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.workers.executors import make_executor
from orchard.lab.workers.launchers.launchers import make_launcher
from orchard.lab.workers.workspace import builds
from orchard.lab.workers.workspace.prompts import render_prompt
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.loop_support import bare_candidate

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")]

HOG = r"""python3 - <<'PY'
import os, time
try:
    small = bytearray(8 * 2**20)
    print("small allocation ok")
    big = bytearray(512 * 2**20)
    print("LEAK memory: 512 MB allocated")
except MemoryError:
    print("blocked memory")
started = 0
children = []
try:
    for _ in range(200):
        pid = os.fork()
        if pid == 0:
            time.sleep(2)
            os._exit(0)
        children.append(pid)
        started += 1
except OSError:
    pass
print(f"forked {started}")
for pid in children:
    os.waitpid(pid, 0)
PY
echo built > built.txt
"""
SPIN = "python3 -c 'while True: pass'\n"
LIMITS = "[workers]\nmemory_mb = 128\nprocesses = 24\ncpu_seconds = 1\n"


def _step(ws: Workspace, script: str) -> tuple[builds.Check, str]:
    checkout = builds.checkout_with_patch(ws, ws.judge_dir / "hog" / "target", ws.target_base(), "")
    (checkout / "build.sh").write_text(script)
    check = builds.candidate_step(ws, "build", ws.config.target.build, checkout, {}, ws.judge_dir / "hog" / "logs")
    return check, Path(check.log or "").read_text()


def test_a_memory_hog_and_a_fork_bomb_are_held_by_the_limits(make_workspace: Callable[..., Workspace]) -> None:
    ws = make_workspace(f'[target]\nbuild = "bash build.sh"\n\n{LIMITS}')
    check, output = _step(ws, HOG)
    assert check.passed, output
    assert "small allocation ok" in output and "blocked memory" in output and "LEAK" not in output, output
    forked = int(output.split("forked ")[1].split()[0])
    assert 0 < forked < 24, output  # a few processes, never the 200 it tried


def test_a_cpu_spinner_is_killed_by_its_cpu_time_limit(make_workspace: Callable[..., Workspace]) -> None:
    ws = make_workspace(f'[target]\nbuild = "bash build.sh"\n\n{LIMITS}')
    check, output = _step(ws, SPIN)
    assert not check.passed and "exit 152" in check.detail, (check.detail, output)  # 128 + SIGXCPU, not the SIGKILL


def test_without_limits_the_same_step_goes_through(make_workspace: Callable[..., Workspace]) -> None:
    ws = make_workspace('[target]\nbuild = "bash build.sh"\n\n[workers]\nmemory_mb = 0\nprocesses = 0\n')
    check, output = _step(ws, HOG.replace("range(200)", "range(40)"))
    assert check.passed and "LEAK memory" in output and "forked 40" in output, output


SPINNER_CONFIG = """
[launcher]
name = "command"
template = "python3 -c 'while True: pass'"

[workers]
cpu_seconds = 1
"""


def test_a_worker_over_its_cpu_limit_is_stopped_and_killed_with_that_reason(
        make_workspace: Callable[..., Workspace]) -> None:
    ws = make_workspace(SPINNER_CONFIG)
    checkout, = ws.setup_workers(["w0"])
    experiment = Experiment("spin", Hypothesis(metric="m", change="c", scope=("src/alpha.txt",)), checkout)
    render_prompt(ws, experiment)
    with make_executor("subprocess", ws.tmux_socket) as executor:
        executor.start(make_launcher(ws.config.launcher).job(ws, experiment))
        (result,) = executor.wait(timeout_s=60)
    assert result.exit_code == 128 + 24, result.log_path.read_text()  # SIGXCPU, well before the 60 s
    checks = collection_checks(bare_candidate(exit_code=result.exit_code, flags=[Flag.EXIT_NONZERO]))
    worker = next(check for check in checks if check.name == "worker")
    assert not worker.passed and "over its CPU time limit" in worker.detail, worker.detail


def test_status_states_the_limits(make_workspace: Callable[..., Workspace]) -> None:
    ws = make_workspace("[workers]\nmemory_mb = 512\nprocesses = 64\ncpu_seconds = 30\n")
    state = LabState.open(ws.root)
    try:
        lab = view.build(ws, state, live=False)
    finally:
        state.close()
    said = "memory 512 MB per process, 64 processes, CPU 30 s per process, files up to 4096 MB (rlimits)"
    assert status.status(lab)["limits"] == said
    console = Console(record=True, width=200)
    console.print(status.render(lab))
    assert f"limits per worker and judge step: {said}" in console.export_text()
