"""Steering a lab (issue 34, item 2): `orchard stop`, `orchard pause`, `orchard resume`, each with who asked.

On main there was no way to stop one experiment, pause the lab or raise a budget other than Ctrl-C and editing
files: none of the three commands existed (`orchard stop` was "No such command"). The slow test runs a whole
lab through them: started paused (a pause recorded while no lab ran), resumed, one worker stopped and KILLed
while the lab is paused again with its experiments budget spent, then resumed with the budget raised, and the
next hypothesis lands.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchard.cli import cli
from orchard.lab.config.orchard_toml import load
from orchard.lab.db.running_time import RunClock
from orchard.lab.db.state import LabState
from orchard.lab.loop.steering import Steering
from orchard.lab.notebook.journal import render_journal
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import Hypothesis, HypothesisStatus, Lane
from orchard.lab.records.judgment import Decision
from orchard.lab.records.steering_events import ExperimentStopped, LimitChanged, Paused, Resumed, StopAsked
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.lab.workers.workspace.workspace_init import init_workspace
from tests.lab.lab_helpers import (
    ALPHA_TARGET,
    REPORTS,
    STDOUT_SUITE,
    TARGET_FILES,
    command_launcher,
    lab_config,
    make_repo,
    one_worker,
    wait_for,
)

COMMENT = "# the budget we agreed on\n"


def _workspace(tmp_path: Path, stop: dict[str, float] | None = None) -> Workspace:
    target = make_repo(tmp_path / "myproject", TARGET_FILES)
    (tmp_path / "suite.toml").write_text(STDOUT_SUITE)
    (tmp_path / "orchard.toml").write_text(lab_config(
        target=ALPHA_TARGET, workers=one_worker(timeout_minutes=10, sandbox="none"),
        launcher=command_launcher("printf 'alpha\\n' > {target_dir}/src/alpha.txt" + REPORTS),
        launchers={"sleeper": command_launcher("sleep 600" + REPORTS)},
        stop={"top_attempted": 9, "idle_loops": 99, **(stop or {})}))
    ws = init_workspace(tmp_path / "ws", str(target), None, tmp_path / "orchard.toml")
    ws.config_path.write_text(ws.config_path.read_text().replace("[stop]\n", f"[stop]\n{COMMENT}"))
    return ws


def _orchard(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.output


def test_resume_writes_the_limits_into_orchard_toml_keeping_the_rest_and_journals_who(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, {"max_experiments": 1})
    assert _orchard("pause", ws.root, "--by", "ana")[0] == 0
    assert "paused by ana: no new workers until `orchard resume" in _orchard("status", ws.root)[1]
    code, said = _orchard("resume", ws.root, "--by", "ana", "--max-experiments", "4", "--max-cost-usd", "2.5")
    assert code == 0, said
    assert "stop.max_experiments 1 -> 4" in said and "stop.max_cost_usd 0 -> 2.5" in said
    assert "paused by" not in _orchard("status", ws.root)[1]
    text = ws.config_path.read_text()
    assert COMMENT in text and "max_experiments = 4\n" in text and "max_cost_usd = 2.5\n" in text
    assert (load(ws.config_path).stop.max_experiments, load(ws.config_path).stop.max_cost_usd) == (4, 2.5)
    state = LabState.open_readonly(ws.root)
    try:
        assert [e.event for e in state.events_of(Paused)] == [Paused("ana")]
        assert [e.event for e in state.events_of(Resumed)] == [
            Resumed("ana", (LimitChanged("max_experiments", 1, 4), LimitChanged("max_cost_usd", 0, 2.5)))]
    finally:
        state.close()


@pytest.mark.parametrize(("args", "said"), [
    (("resume", "{ws}"), "is not paused: nothing to resume"),
    (("resume", "{ws}", "--idle-loops", "-1"), "orchard.toml was left as it was"),
    (("stop", "{ws}", "no-such"), "no-such: no such experiment"),
    (("stop", "{ws}", "done-one"), "done-one has no worker at work to stop (it is done)"),
])
def test_bad_steering_is_one_message_and_exit_2(tmp_path: Path, args: tuple[str, ...], said: str) -> None:
    ws = _workspace(tmp_path)
    before = ws.config_path.read_text()
    state = LabState.open(ws.root)
    try:
        state.add_hypothesis(Hypothesis(id="h", metric="out/stdout_bytes", change="x"), source="user")
        state.add_experiment("done-one", "h", "w1", Lane.EXPLOIT, 1, ws.target_base(), ws.bench_base(),
                             ExperimentStatus.DONE)
    finally:
        state.close()
    code, output = _orchard(*(a.format(ws=ws.root) for a in args))
    assert code == 2 and said in output and "Traceback" not in output, output
    assert output.count("\n") == 1, output
    assert ws.config_path.read_text() == before


class _Executor:
    """The one running worker a lab's executor knows, and what the lab cancelled."""

    def __init__(self, running: str) -> None:
        self.names, self.cancelled = {running}, list[str]()

    def running(self) -> set[str]:
        return self.names

    def cancel(self, name: str, reason: str = "cancelled") -> None:
        self.cancelled.append(name)


class _Lab:
    """What `Steering` asks of the loop (loop/driver.py)."""

    def __init__(self, ws: Workspace, state: LabState, executor: _Executor) -> None:
        self.ws, self.state, self.executor = ws, state, executor
        self.deferred: set[str] = set()
        self.said: list[str] = []

    def say(self, text: str) -> None:
        self.said.append(text)

    def render(self) -> None:
        pass


@pytest.mark.parametrize("requeue", [True, False])
def test_the_loop_stops_an_asked_worker_unjudged_and_requeues_or_kills_its_hypothesis(
    tmp_path: Path, requeue: bool
) -> None:
    ws = _workspace(tmp_path)
    state = LabState.open(ws.root)
    try:
        state.add_hypothesis(Hypothesis(id="h", metric="out/stdout_bytes", change="x"), source="user")
        state.update_hypothesis("h", status=HypothesisStatus.RUNNING)
        state.add_experiment("e1", "h", "w1", Lane.EXPLOIT, 1, ws.target_base(), ws.bench_base(),
                             ExperimentStatus.RUNNING)
        ws.worker("w1").root.mkdir()
        args = ["stop", ws.root, "e1", "--by", "ana", *([] if requeue else ["--kill"])]
        code, said = _orchard(*args)
        assert code == 0 and "stop asked by ana" in said and "no lab runs on it now" in said, said
        executor = _Executor("e1")
        lab = _Lab(ws, state, executor)
        assert Steering(state, RunClock()).steer(lab) is False  # the lab is not paused
        record = state.experiment("e1")
        assert (record.status, record.decision) == (ExperimentStatus.DONE, None if requeue else Decision.KILL)
        assert record.judgment is None and "stopped by ana" in record.reasons[0]
        assert state.hypothesis("h").status == (HypothesisStatus.OPEN if requeue else HypothesisStatus.KILLED)
        assert executor.cancelled == ["e1"] and not ws.worker("w1").root.exists()
        assert lab.deferred == ({"h"} if requeue else set())
        assert [e.event for e in state.events_of(StopAsked)] == [StopAsked(requeue, "ana")]
        assert [e.event for e in state.events_of(ExperimentStopped)] == [ExperimentStopped("h", requeue, "ana")]
        assert "The lab stopped this worker, as ana asked: never judged" in render_journal(state)
        Steering(state, RunClock()).steer(lab)  # a stop is carried out once
        assert executor.cancelled == ["e1"]
    finally:
        state.close()


def _cli(*args: str | Path) -> None:
    done = subprocess.run([sys.executable, "-m", "orchard", *map(str, args)], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def _status(root: Path, experiment: str) -> ExperimentStatus | None:
    state = LabState.open_readonly(root)
    try:
        return next((e.status for e in state.experiments() if e.name == experiment), None)
    finally:
        state.close()


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_lab_started_paused_is_resumed_a_worker_stopped_and_a_budget_raised_while_paused(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, {"max_experiments": 1})
    (tmp_path / "hypotheses.toml").write_text(
        '[[hypothesis]]\nid = "hang"\nmetric = "out/stdout_bytes"\nchange = "hang"\nscope = ["src/alpha.txt"]\n'
        'impact = 5\nlauncher = "sleeper"\n\n'
        '[[hypothesis]]\nid = "win"\nmetric = "out/stdout_bytes"\nchange = "win"\nscope = ["src/alpha.txt"]\n'
        'impact = 1\n')
    _cli("backlog", "add", ws.root, "--file", tmp_path / "hypotheses.toml")
    _cli("pause", ws.root, "--by", "ana")  # no lab runs: the next one starts paused
    log = tmp_path / "run.log"
    with log.open("w") as out:
        run = subprocess.Popen([sys.executable, "-m", "orchard", "run", ws.root], stdout=out,
                               stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        wait_for(lambda: "paused by ana" in log.read_text(), "the lab to say it is paused", 300)
        _cli("resume", ws.root, "--by", "ana")
        wait_for(lambda: _status(ws.root, "hang") == ExperimentStatus.RUNNING, "hang's worker to run", 300)
        _cli("pause", ws.root, "--by", "bo")  # before the stop: the pass that stops hang sees the pause too
        _cli("stop", ws.root, "hang", "--kill", "--by", "bo")
        wait_for(lambda: _status(ws.root, "hang") == ExperimentStatus.DONE, "hang to be stopped", 300)
        # paused with its budget of 1 experiment spent: the lab waits instead of stopping
        assert run.poll() is None
        _cli("resume", ws.root, "--by", "bo", "--max-experiments", "3")
        assert run.wait(timeout=900) == 0, log.read_text()
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    state = LabState.open_readonly(ws.root)
    try:
        hang, win = state.experiment("hang"), next(e for e in state.experiments() if e.hypothesis == "win")
        assert (hang.decision, hang.judgment) == (Decision.KILL, None) and "stopped by bo" in hang.reasons[0]
        assert win.decision == Decision.LAND
        resumes = state.events_of(Resumed)
        assert [r.event for r in resumes] == [Resumed("ana"), Resumed("bo", (LimitChanged("max_experiments", 1, 3),))]
        started = [e for e in state.events() if e.kind == "experiment-start"]
        assert started and all(e.id > resumes[0].id for e in started)  # nothing started while paused
        assert [e.event.by for e in state.events_of(ExperimentStopped)] == ["bo"]
    finally:
        state.close()
    assert COMMENT in ws.config_path.read_text()
    journal = (ws.root / "JOURNAL.md").read_text()
    assert "stop-asked" in journal and "experiment-stopped" in journal and "pause" in journal

