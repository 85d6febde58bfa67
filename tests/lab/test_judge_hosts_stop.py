"""A lab with judge hosts stopped (SIGTERM) while its verdicts run and more wait: it exits at once, leaves nothing
running, and the next `orchard run` judges the interrupted candidates again.

The judge threads used to wait for their dask futures however long the verdicts (and those queued behind them on
busy hosts) took: docs/benchmarks.md section 8 saw a 64-worker, 4-host lab still running 600 s after its SIGTERM.
Needs root (a network namespace), as tests/lab/test_judge_hosts.py does.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from orchard.lab.db.state import LabState
from orchard.lab.landing.judge_hosts import JudgeHosts, LabStopping
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.judge_host import JudgeStarted, JudgeStep
from orchard.lab.records.judgment import JudgmentEntry
from orchard.lab.workers.dask.serving import ServedRepositories
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.judge_host_support import judge_host_lab
from tests.lab.lab_helpers import git, processes_marked, wait_for
from tests.lab.lab_helpers import lab_events as events
from tests.lab.test_dask import finish, orchard

# three candidates, two judge hosts; each is measured (its verdict held), none KILLed before: tokenize-regex, KILLed
# on its host for leaving its scope, held the state the test waits for only while it was the third, waiting (ci38:
# it was sent first, KILLed 15 ms after its start, and the lab then held the two others for good)
CANDIDATES = ["longest-word-one-pass", "single-write", "count-with-dict"]
EXIT_S = 60  # generous on a noisy machine: the hang was minutes


def _held_verdicts(release: Path) -> Callable[[Workspace], None]:
    """A fixture in the lab's bench that, in a judge host's copy of the bench (`remote.judge_scratch`), waits until
    `release` exists: no verdict there can end before the test has seen the state it stops the lab in. (A fixture
    that slept 20 s let all three verdicts end first on a loaded machine, and the lab exited before its SIGTERM.)
    The lab's own start and the workers' measurements, in other copies, are not held."""
    wait = f'case "{{suite_dir}}" in */orchard-judge-*) until [ -e {release} ]; do sleep 0.2; done;; esac'

    def hold(ws: Workspace) -> None:
        suite = ws.bench_dir / "suite.toml"
        text = suite.read_text().replace("timeout_s = 30", "timeout_s = 1800")  # fixtures share the runs' limit
        suite.write_text(text + f'\n[[fixture]]\nname = "hold"\ncommand = ["sh", "-c", {json.dumps(wait)}]\n')
        git(ws.bench_dir, "commit", "--quiet", "-am", "a fixture that waits on the judge hosts: held verdicts")

    return hold


def _experiments(root: Path) -> dict[str, tuple[ExperimentStatus, str | None]]:
    state = LabState.open(root)
    try:
        return {e.name: (e.status, e.decision) for e in state.experiments()}
    finally:
        state.close()


def _left_by_the_lab(mark: str, cluster: set[int]) -> list[psutil.Process]:
    """Marked processes outside the process trees of the test's own scheduler and judge hosts (by pid)."""
    hosts = {p.pid for pid in cluster if psutil.pid_exists(pid)
             for p in [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]}
    return [p for p in processes_marked(mark) if p.pid not in hosts and p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.slow
@pytest.mark.timeout(1800)  # measurements on a shared machine; the lab's own waits are bounded
def test_a_judge_host_lab_stopped_mid_verdict_exits_and_judges_them_again_on_resume(
        tmp_path: Path, mark: str) -> None:
    # `judges = 2` a host (the default): one verdict measuring on each, the third queued behind them
    release = tmp_path / "release"
    with judge_host_lab(tmp_path, mark, CANDIDATES, _held_verdicts(release)) as lab:
        ws = lab.ws
        cluster = {p.pid for p in processes_marked(mark)}  # the scheduler and the two hosts: the test's, not the lab's
        lab = orchard("run", str(ws.root), mark=mark)
        try:
            wait_for(lambda: lab.poll() is not None or (
                len({e.event.judge for e in events(ws.root, JudgeStarted)}) == 2
                and sum(s == ExperimentStatus.JUDGING for s, _ in _experiments(ws.root).values()) == 3),
                     "two verdicts measuring on the two hosts and a third waiting", limit_s=900)
            assert lab.poll() is None, lab.communicate()[0]  # it did not stop before
            stopped_at = _experiments(ws.root)
            lab.send_signal(signal.SIGTERM)
            try:
                output, _ = lab.communicate(timeout=EXIT_S)
            except subprocess.TimeoutExpired:
                pytest.fail(f"the lab had not exited {EXIT_S} s after its SIGTERM")
            assert _left_by_the_lab(mark, cluster) == [], output
        finally:
            release.touch()  # the hosts' abandoned verdicts end, and the next run's are not held
            if lab.poll() is None:
                lab.kill()
                lab.communicate()
        interrupted = {name for name, (status, _) in stopped_at.items() if status == ExperimentStatus.JUDGING}
        assert len(interrupted) == 3
        assert {name: status for name, (status, _) in _experiments(ws.root).items()} == dict.fromkeys(
            interrupted, ExperimentStatus.JUDGING), output  # nothing decided from a verdict cut short
        output = finish(orchard("run", str(ws.root), mark=mark), timeout=1400)
        after = _experiments(ws.root)
    assert {name for name, (_, decision) in after.items() if decision is not None} >= interrupted, output
    judged = [e.experiment for e in events(ws.root, JudgmentEntry)]
    assert sorted(judged) == sorted(after), judged  # each judged once, by the run that resumed
    started = [e.event.step for e in events(ws.root, JudgeStarted) if e.experiment in interrupted]
    assert started.count(JudgeStep.VERDICT) >= len(interrupted) + 2, started  # the cut ones started again


def _holds(key: str, dask_scheduler: Any) -> bool:
    return key in dask_scheduler.tasks


@pytest.mark.slow  # a dask LocalCluster: a few seconds
def test_a_step_dask_never_runs_is_cancelled_when_the_lab_stops(make_workspace: Callable[..., Workspace]) -> None:
    """No judge host has a free slot (here: none at all), so the verdict waits in dask's queue: the lab's stop ends
    the wait, and the task leaves the cluster."""
    from distributed import Client, LocalCluster

    ws = make_workspace()
    stopping = threading.Event()
    state = LabState.open(ws.root)
    try:
        with LocalCluster(n_workers=1, processes=False, threads_per_worker=1, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            hosts = JudgeHosts(client, "test-lab", ServedRepositories("/nowhere/t", "/nowhere/b"), ws.config, stopping)
            job = hosts.job("e1", "e1", JudgeStep.VERDICT, "bench", "main")
            threading.Timer(1.0, stopping.set).start()
            with pytest.raises(LabStopping, match="e1: its verdict was abandoned: the lab is stopping"):
                hosts.run(state, job, None, lambda _: None)
            wait_for(lambda: not client.run_on_scheduler(_holds, key=job.key), "the task to leave the scheduler")
    finally:
        state.close()
