"""Workers end to end: real git, real tmux (and plain subprocesses), real worker processes.

Each test sets up workers in a fresh workspace, renders their prompts, runs
them at once, collects the candidates, and checks afterwards that no tmux
server, window or process it started is left.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

import libtmux
import pytest

from orchard.lab.judge.candidate import collect_candidate
from orchard.lab.records.candidate import Candidate
from orchard.lab.records.experiment import Experiment
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.workers.executors import ProcessExecutor, make_executor
from orchard.lab.workers.jobs.job import JobResult
from orchard.lab.workers.launchers.launcher_base import Launcher
from orchard.lab.workers.launchers.launchers import make_launcher
from orchard.lab.workers.workspace.prompts import render_prompt
from orchard.lab.workers.workspace.workspace import Workspace
from tests.helpers import slow_but
from tests.lab.lab_helpers import assert_nothing_left, git, processes_marked
from tests.lab.standin import calls

EXECUTORS = ["tmux", "subprocess"]

PATCH_CONFIG = """
[target]
build = "test -f {binary}"
test = "sh tests/check.sh"
binary = "src/alpha.txt"

[bench]
measure = "python3 measure.py {binary}"

[launcher]
name = "patch"

[workers]
count = 3
exploit = 2
explore = 1
timeout_minutes = 2
"""

# The bench's measure script prints its measurements in the report's shape.
MEASURE_PY = """import json, os, sys
size = os.path.getsize(sys.argv[1])
print(json.dumps({"measurements": [{"metric": "binary_bytes", "before": None, "after": size,
                                    "n": 1, "noise_floor": None, "cleared_noise_floor": None}]}))
"""


def _patch(name: str, old: str, new: str) -> str:
    return f"--- a/{name}\n+++ b/{name}\n@@ -1 +1 @@\n-{old}\n+{new}\n"


def run_experiments(
    workspace: Workspace,
    executor: ProcessExecutor,
    launcher: Launcher,
    plans: dict[str, tuple[Hypothesis, dict[str, str]]],
    mark: str,
    timeouts: dict[str, float] | None = None,
) -> dict[str, tuple[Candidate, JobResult]]:
    """Set up one worker per experiment, start them all, wait, collect."""
    names = list(plans)
    checkouts = workspace.setup_workers([f"w{i}" for i in range(len(names))], ignore=launcher.scratch)
    experiments = {}
    for name, checkout in zip(names, checkouts, strict=True):
        hypothesis, env = plans[name]
        experiment = Experiment(name, hypothesis, checkout)
        render_prompt(workspace, experiment)
        job = launcher.job(workspace, experiment, env={**env, "ORCHARD_TEST_MARK": mark})
        if timeouts and name in timeouts:
            job = dataclasses.replace(job, timeout_s=timeouts[name])
        executor.start(job)
        experiments[name] = experiment
    if executor.kind == "tmux":
        server = libtmux.Server(socket_name=workspace.tmux_socket)
        windows = server.cmd("list-windows", "-t", "orchard", "-F", "#{window_name}").stdout
        assert sorted(windows) == sorted(names), "one tmux window per worker, named after its experiment"
    results = {result.name: result for result in executor.wait(timeout_s=120)}
    assert sorted(results) == sorted(names)
    return {name: (collect_candidate(workspace, experiments[name], results[name], launcher), results[name])
            for name in names}


@pytest.mark.parametrize("kind", slow_but(EXECUTORS, "tmux"))  # the other executor in the fast tier below
def test_three_patch_workers_at_once_each_yield_candidate_and_report(
    kind: str, make_workspace: Callable[..., Workspace], bench_repo: Path, tmp_path: Path, mark: str
) -> None:
    (bench_repo / "measure.py").write_text(MEASURE_PY)
    git(bench_repo, "add", "-A")
    git(bench_repo, "commit", "-qm", "measure script")
    workspace = make_workspace(PATCH_CONFIG)
    plans = {}
    for letter in ("alpha", "beta", "gamma"):
        patch = tmp_path / f"{letter}.diff"
        patch.write_text(_patch(f"src/{letter}.txt", f"{letter} 1", f"{letter} 2"))
        plans[f"speed-{letter}"] = (
            Hypothesis(metric="binary_bytes", change=f"rewrite {letter}", scope=(f"src/{letter}.txt",),
                       patch=str(patch)), {})
    launcher = make_launcher(workspace.config.launcher)
    with make_executor(kind, workspace.tmux_socket) as executor:
        outcomes = run_experiments(workspace, executor, launcher, plans, mark)
    assert_nothing_left(mark, workspace.tmux_socket)

    for name, (candidate, result) in outcomes.items():
        letter = name.split("-")[1]
        assert result.exit_code == 0 and not result.timed_out
        assert candidate.flags == []
        assert candidate.changed_files == [f"src/{letter}.txt"]
        assert f"+{letter} 2" in candidate.patch and f"-{letter} 1" in candidate.patch
        assert candidate.report.state == "ok"
        report = candidate.report.report
        assert report["status"] == "done" and report["experiment"] == name
        assert report["build"]["exit_code"] == 0 and report["tests"]["exit_code"] == 0
        # {binary} was the worker's own absolute binary path: its size is measured.
        binary = workspace.worker(candidate.worker).target_dir / "src/alpha.txt"
        assert report["measure"]["command"] == f"python3 measure.py {binary}"
        assert report["measurements"][0]["after"] == binary.stat().st_size
        log = Path(candidate.log_path).read_text()
        assert log.rstrip().endswith("WORKER_DONE_0")
        assert candidate.log_path == str(workspace.logs_dir / f"{name}.log")


MISBEHAVING = {
    "hangs": "hang",
    "tampers": "tamper",
    "strays": "leave-scope",
    "silent": "no-report",
    "garbles": "bad-report",
    "commits": "commit",
    "behaves": "edit",
}


@pytest.mark.parametrize("kind", slow_but(EXECUTORS, "subprocess"))
def test_misbehaving_workers_are_flagged_and_a_hanging_one_is_killed(
    kind: str, make_workspace: Callable[..., Workspace], standin_bin: Path, mark: str
) -> None:
    workspace = make_workspace('[launcher]\nname = "claude"\n')
    launcher = make_launcher(workspace.config.launcher)
    env_base = {"PATH": f"{standin_bin}:{os.environ['PATH']}"}
    plans = {
        name: (Hypothesis(metric="m", change="c", scope=("src/beta.txt",)), {**env_base, "STANDIN_MODE": mode})
        for name, mode in MISBEHAVING.items()
    }
    with make_executor(kind, workspace.tmux_socket) as executor:
        outcomes = run_experiments(workspace, executor, launcher, plans, mark, timeouts={"hangs": 3.0})
        # The hanging worker's whole tree (a grandchild in its own session
        # included) was killed at its timeout, before the executor closed.
        assert [p for p in processes_marked(mark) if p.status() != "zombie"] == []
    assert_nothing_left(mark, workspace.tmux_socket)

    flags = {name: candidate.flags for name, (candidate, _) in outcomes.items()}
    hang, hang_result = outcomes["hangs"]
    assert hang_result.timed_out and "timed-out" in hang.flags and "report-missing" in hang.flags
    assert "timeout" in Path(hang.log_path).read_text()

    # the bench clone is read-only in the sandbox (and not the sandbox uid's, as root): the tampering
    # worker's write fails, nothing changed
    tamper = outcomes["tampers"][0]
    assert tamper.flags == [] and tamper.bench_changes == []
    said = Path(tamper.log_path).read_text()
    assert "cannot change the bench" in said
    assert "Read-only file system" in said or (os.geteuid() == 0 and "Permission denied" in said), said
    stray = outcomes["strays"][0]
    assert "scope-violation" in stray.flags and stray.scope_violations == ["README"]
    assert stray.changed_files == ["README", "src/beta.txt"]
    assert flags["silent"] == ["report-missing"]
    garbled = outcomes["garbles"][0]
    assert garbled.flags == ["report-malformed"] and garbled.report.raw == "this is not json"
    commits = outcomes["commits"][0]
    assert "worker-committed" in commits.flags and commits.changed_files == ["src/beta.txt"]
    assert flags["behaves"] == []
    assert outcomes["behaves"][0].usage.cost_usd == pytest.approx(0.0123)


@pytest.mark.parametrize("cli", ["claude", "codex", "cursor", "aider"])
def test_agent_cli_workers_edit_report_and_give_usage(
    cli: str, make_workspace: Callable[..., Workspace], standin_bin: Path, mark: str
) -> None:
    workspace = make_workspace(f'[target]\ntest = "sh tests/check.sh"\n[launcher]\nname = "{cli}"\n')
    launcher = make_launcher(workspace.config.launcher)
    env = {"PATH": f"{standin_bin}:{os.environ['PATH']}"}
    plans = {f"try-{cli}": (Hypothesis(metric="m", change="c", scope=("src/gamma.txt",)), env)}
    with make_executor("tmux", workspace.tmux_socket) as executor:
        candidate, result = run_experiments(workspace, executor, launcher, plans, mark)[f"try-{cli}"]
    assert_nothing_left(mark, workspace.tmux_socket)

    assert result.exit_code == 0
    assert candidate.flags == [] and candidate.changed_files == ["src/gamma.txt"]
    assert candidate.report.state == "ok"
    (call,) = calls(Path(candidate.log_path).read_text())
    assert call["cwd"] == str(workspace.worker(candidate.worker).target_dir)
    usage = candidate.usage
    expected = {
        "claude": (0.0123, 1200, 340, 3),
        "codex": (pytest.approx(0.002275), 1200, 100, 2),  # estimated: its tokens at its default model's price
        "cursor": (None, None, None, None),
        "aider": (0.03, 3700, 460, 2),
    }[cli]
    assert (usage.cost_usd, usage.input_tokens, usage.output_tokens, usage.turns) == expected
    assert usage.estimated == (cli == "codex")
