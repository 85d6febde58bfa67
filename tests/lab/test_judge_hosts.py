"""Several judges: verdicts on judge hosts of the lab's dask cluster, each host with its own lock, calibration and
baselines, a win's confirmation and main check pinned to the host that judged it.

The slow test runs one lab on two judge hosts, each a `dask worker` in a network namespace of its own (as in
test_dask_netns.py; needs root): both hosts judge a win, the two wins touch different files, and both land
through the lab's main, the second after a rebase verdict on its own host.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from orchard.lab.config import orchard_toml as config_module
from orchard.lab.config.orchard_toml import ConfigError
from orchard.lab.db.state import LabState
from orchard.lab.judge.gathering import Gathering
from orchard.lab.landing.judge_hosts import JudgeHostGone, JudgeHosts, judge_addresses
from orchard.lab.landing.land import LandOutcome, Steps
from orchard.lab.loop.judging import Judging
from orchard.lab.loop.lab import Lab
from orchard.lab.notebook import files as records
from orchard.lab.notebook import status, view
from orchard.lab.notebook.pages import build_page
from orchard.lab.records.db import EVENT_TYPES
from orchard.lab.records.events import EventKind
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import Hypothesis, HypothesisStatus, Lane
from orchard.lab.records.judge_host import JudgeHost, JudgeLost, JudgeStarted, JudgeStep
from orchard.lab.records.judgment import Decision, Judgment, JudgmentEntry
from orchard.lab.records.land_steps import Committed, Confirmed, MainChecked, Rebased
from orchard.lab.workers.dask.remote import judge_scratch, lab_id, remove_scratch, scratch_dir
from orchard.lab.workers.dask.serving import ServedRepositories
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.judge_host_support import judge_host_lab
from tests.lab.lab_helpers import first_experiments, git
from tests.lab.lab_helpers import lab_events as events
from tests.lab.test_dask import assert_no_scratch, finish, orchard

A = JudgeHost("judge-a", "tcp://10.0.0.2:4001")


def test_a_judgment_names_its_judge_host_and_reads_back_as_written() -> None:
    judged = Judgment(Decision.LAND, ("wall_ms improved",), judge=A)
    assert Judgment.from_dict(judged.to_dict()) == judged
    assert "judge" not in Judgment(Decision.KILL, ()).to_dict()  # a local judgment is stored as it always was
    assert Judgment.from_dict(Judgment(Decision.KILL, ()).to_dict()).judge is None
    confirmed = Confirmed(verdict=None, refused="no binary", judge=A)
    assert Confirmed.from_dict(confirmed.to_dict()) == confirmed
    assert "judge" not in Confirmed(refused="x").to_dict()
    checked = MainChecked(None, False, {}, A)
    assert MainChecked.from_dict(checked.to_dict()) == checked
    started = JudgeStarted(A, JudgeStep.CONFIRM)
    assert EVENT_TYPES[started.kind].from_dict(started.to_dict()) == started and "lost_on" not in started.to_dict()
    again = JudgeStarted(JudgeHost("judge-b", "tcp://10.0.0.6:4001"), JudgeStep.VERDICT, lost_on=A)
    assert EVENT_TYPES[again.kind].from_dict(again.to_dict()) == again


def test_a_leased_step_is_placed_on_its_judge_host_or_nowhere() -> None:
    assert A.pinned() == {"workers": ["tcp://10.0.0.2:4001"], "allow_other_workers": False,
                          "resources": {"judge": 1}}
    info = {"workers": {"tcp://a:1": {"host": "a", "resources": {"judge": 1, "agent": 1}},
                        "tcp://b:1": {"host": "b", "resources": {"agent": 2}},
                        "tcp://c:1": {"host": "c", "resources": {"judge": 2}}}}
    assert judge_addresses(info) == {"tcp://a:1": "a", "tcp://c:1": "c"}  # agent-only workers judge nothing
    assert judge_scratch("lab1", "tcp://a:1") != judge_scratch("lab1", "tcp://c:1")  # each host its own copy
    assert judge_scratch("lab1", "tcp://a:1").parent == scratch_dir("lab1").parent


@pytest.mark.parametrize(("workers", "review", "said"), [
    ({"judge_hosts": 2}, {}, 'needs executor = "dask"'),
    ({"judge_hosts": 1, "executor": "dask"}, {"template": "true"}, "[review]"),
    ({"judge_hosts": -1, "executor": "dask"}, {}, "workers.judge_hosts"),
])
def test_judge_hosts_are_refused_with_what_they_cannot_go_with(
        workers: dict[str, object], review: dict[str, object], said: str) -> None:
    with pytest.raises(ConfigError) as refused:
        config_module.from_dict({"target": {"repo": "/r"}, "workers": workers, "review": review})
    assert said in str(refused.value)
    assert config_module.from_dict({"target": {"repo": "/r"}, "workers": {"executor": "dask", "judge_hosts": 2}})


@pytest.mark.parametrize(("workers", "at_once"), [
    ({}, 2),  # the lab's machine: `judges` candidates, their measurements taking turns under its lock
    ({"executor": "dask", "judge_hosts": 2}, 4),  # `judges` per judge host
    ({"executor": "dask", "judge_hosts": 3, "judges": 1}, 3),
])
def test_each_judge_host_has_its_next_verdict_waiting_while_it_measures(
        tmp_path: Path, workers: dict[str, object], at_once: int) -> None:
    """One verdict per host was not enough: a host that finished sat idle until the loop's next pass handed its
    thread another candidate (fleet.py, 8 workers, 2 judge hosts: each busy about 60% of the window with its
    queue growing). With `judges` per host, dask holds the next verdict for each host while it measures."""
    config = config_module.from_dict({"target": {"repo": "/r"}, "workers": workers})
    assert Judging(Workspace(tmp_path, config), print, None, Gathering(1)).threads == at_once


@pytest.mark.slow
@pytest.mark.timeout(1500)  # measurements on a shared machine; the lab's own waits are bounded
def test_two_judge_hosts_each_judge_and_land_a_win_through_one_main(tmp_path: Path, mark: str) -> None:
    with judge_host_lab(tmp_path, mark, ["count-with-dict", "terse-report"]) as lab:
        ws, first, second = lab.ws, lab.first, lab.second
        output = finish(orchard("run", str(ws.root), mark=mark), timeout=1400)
    wins = first_experiments(ws.root)
    assert {h: e.decision for h, e in wins.items()} == {"count-with-dict": "LAND", "terse-report": "LAND"}, output
    judges = {h: e.judgment.judge for h, e in wins.items() if e.judgment is not None}
    assert len({j.address for j in judges.values() if j is not None}) == 2, judges  # each host judged one
    hosts = {f"tcp://{first.address}", f"tcp://{second.address}"}
    assert {j.address.rsplit(":", 1)[0] for j in judges.values() if j is not None} == hosts
    started = events(ws.root, JudgeStarted)
    rebased = [e for e in events(ws.root, Rebased) if e.event.needed]
    assert len(rebased) == 1, output  # the second win to land found main moved: judged again, on its own host
    (again,) = rebased
    for hypothesis, experiment in wins.items():
        judge = judges[hypothesis]
        mine = [e.event for e in started if e.experiment == experiment.name]
        # the rebased win's judgment on the new main is its confirmation (docs/loop.md, Landing)
        landing = JudgeStep.REBASE if experiment.name == again.experiment else JudgeStep.CONFIRM
        assert {e.step for e in mine} >= {JudgeStep.VERDICT, landing, JudgeStep.MAIN_CHECK}, mine
        assert {e.judge for e in mine} == {judge}, mine  # its verdict, confirmation and main check: one host
        (confirmed,) = [e.event for e in events(ws.root, Confirmed) if e.experiment == experiment.name]
        (checked,) = [e.event for e in events(ws.root, MainChecked) if e.experiment == experiment.name]
        assert confirmed.judge == judge and checked.judge == judge
        assert (confirmed.by is not None) == (landing == JudgeStep.REBASE), confirmed
        assert experiment.merge_commit is not None
    assert again.event.judgment is not None and again.event.lands
    assert again.event.judgment.judge == next(e.judgment.judge for e in wins.values() if e.name == again.experiment)
    log = git(ws.root / "origin" / "target.git", "log", "--format=%s", "main")
    assert log.count("lab: merge") == 2, log  # main holds both wins
    for name in ("a", "b"):
        assert any((tmp_path / f"cache-{name}").rglob("*.json")), f"judge host {name} has no calibration of its own"
    assert "on judge host" in output
    journal = (ws.root / "JOURNAL.md").read_text()
    for hypothesis, experiment in wins.items():
        step = "rebase" if experiment.name == again.experiment else "confirm"
        j = judges[hypothesis]
        assert j is not None and f"Its {step} runs on judge host `{j.host}` (dask worker `{j.address}`)." in journal
    report = (ws.root / "FINAL_REPORT.md").read_text()  # each host's account: here each judged and landed one win
    hosts_said = [line for line in report.splitlines() if line.startswith("- judge host ")]
    assert sorted(line.split(": verdicts run ")[0] for line in hosts_said) == sorted(
        f"- judge host {j.label}" for j in judges.values() if j is not None), report
    assert all("(wins 1, landed 1)" in line for line in hosts_said), report
    shown = subprocess.run([sys.executable, "-m", "orchard", "status", str(ws.root), "--json"], capture_output=True,
                           text=True, check=True).stdout
    assert sorted(q["judge"] for q in json.loads(shown)["judges"]) == sorted(j.label for j in judges.values() if j)
    assert_no_scratch(ws.root)
    assert not list(scratch_dir(lab_id(ws.root)).parent.glob(f"orchard-judge-{lab_id(ws.root)}-*"))  # removed


def test_status_and_the_dashboard_show_each_judge_hosts_queue(make_workspace: Callable[..., Workspace]) -> None:
    ws = make_workspace()
    b = JudgeHost("judge-b", "tcp://10.0.0.6:4001")
    state = LabState.open(ws.root)
    try:
        for name, state_of in (("e1", ExperimentStatus.JUDGING), ("e2", ExperimentStatus.LANDING),
                             ("e3", ExperimentStatus.COLLECTED), ("e4", ExperimentStatus.DONE)):
            state.add_hypothesis(Hypothesis(metric="m", change=name, id=name), source="user")
            state.add_experiment(name, name, "w0", Lane.EXPLOIT, 1, "base", "bench", state_of)
        state.log(JudgeStarted(A, JudgeStep.VERDICT), "e1")
        state.log(JudgeStarted(b, JudgeStep.VERDICT), "e2")
        state.log(JudgeStarted(b, JudgeStep.CONFIRM), "e2")  # its landing, on the host that judged it
        state.log(JudgeStarted(A, JudgeStep.VERDICT), "e4")  # done: in no queue
        lab = view.build(ws, state, live=False)
        journal = ws.root / "JOURNAL.md"
        records.write_notebook(ws, state)
    finally:
        state.close()
    assert status.status(lab)["judges"] == [
        {"judge": A.label, "work": ["e1 (verdict)"]}, {"judge": b.label, "work": ["e2 (confirm)"]},
        {"judge": "waiting for a judge host", "work": ["e3"]}]
    console = Console(record=True, width=200)
    console.print(status.render(lab))
    shown = console.export_text()
    assert f"judge {A.label}: e1 (verdict)" in shown and f"judge {b.label}: e2 (confirm)" in shown
    assert "judge waiting for a judge host: e3" in shown
    page = build_page(lab, live=True).sections["lock"]
    assert f"judge {b.label}: e2 (confirm)" in page.replace("&#x27;", "'")
    assert "Its confirm runs on judge host `judge-b` (dask worker `tcp://10.0.0.6:4001`)." in journal.read_text()


def test_a_lab_without_judge_hosts_shows_no_judge_queue_and_reports_none(
        make_workspace: Callable[..., Workspace]) -> None:
    ws = make_workspace()
    state = LabState.open(ws.root)
    try:
        state.add_hypothesis(Hypothesis(metric="m", change="c", id="e1"), source="user")
        state.add_experiment("e1", "e1", "w0", Lane.EXPLOIT, 1, "base", "bench", ExperimentStatus.JUDGING)
        lab = view.build(ws, state, live=False)
        records.write_notebook(ws, state, final=True)
    finally:
        state.close()
    assert lab.judges == () and status.status(lab)["judges"] == []
    assert "## Judge hosts" not in (ws.root / "FINAL_REPORT.md").read_text()  # nor a report's account of any


def test_a_win_whose_judge_host_left_before_its_merge_is_judged_again_from_scratch(
        make_workspace: Callable[..., Workspace]) -> None:
    ws = make_workspace()
    state = LabState.open(ws.root)
    try:
        state.add_hypothesis(Hypothesis(metric="m", change="c", id="h1"), source="user")
        state.add_experiment("e1", "h1", "w0", Lane.EXPLOIT, 1, "base", "bench", ExperimentStatus.LANDING)
        judged = Judgment(Decision.LAND, ("wall_ms improved",), judge=A)
        state.update_experiment("e1", judgment=judged, decision=Decision.LAND)
        state.update_hypothesis("h1", status=HypothesisStatus.LANDED)
        state.log(JudgmentEntry.of(judged, state.hypothesis("h1").hypothesis, None, "bwrap"), "e1")
        state.log(Committed("lab/e1", "c" * 40), "e1")
        assert set(Steps(state, "e1").done) == {EventKind.LAND}  # a landing resumes where it stopped
        lab = Lab(ws, state, say=lambda _: None)
        lost = JudgeLost(A, JudgeStep.CONFIRM, f"e1: its judge host {A.label} has left the cluster")
        lab._landed(state.experiment("e1"), LandOutcome("lab/e1", "c" * 40, False, None, False, [], judge_lost=lost))
        again = state.experiment("e1")
        assert (again.status, again.judgment, again.decision) == (ExperimentStatus.COLLECTED, None, None)
        assert state.hypothesis("h1").status == HypothesisStatus.RUNNING  # not back in the backlog: being judged
        assert [e.event for e in state.events_of(JudgeLost)] == [lost]
        state.log(JudgmentEntry.of(replace(judged, judge=JudgeHost("judge-b", "tcp://b:1")),
                                   state.hypothesis("h1").hypothesis, None, "bwrap"), "e1")
        assert Steps(state, "e1").done == {}  # the new judgment's landing starts from its first step
    finally:
        state.close()
    assert "left the cluster before its confirm: judged again from scratch" in (ws.root / "JOURNAL.md").read_text()


@pytest.mark.slow  # a dask LocalCluster: about 3 s here
def test_a_step_leased_to_a_judge_host_that_is_gone_runs_nowhere_else_but_a_main_check(
        make_workspace: Callable[..., Workspace]) -> None:
    """A confirmation whose host is gone is not run on another (its win stays unmerged); a main check, after the
    merge, is: both mains are measured on that other host. (Here the served repositories do not exist: the main
    check fails on its host, which shows where it ran.)"""
    from distributed import Client, LocalCluster

    ws = make_workspace()
    gone = JudgeHost("judge-gone", "tcp://127.0.0.1:9")  # another judge host is up, with a free slot
    lab = f"test-{uuid.uuid4().hex[:8]}"
    state = LabState.open(ws.root)
    state.add_hypothesis(Hypothesis(metric="m", change="c", id="e1"), source="user")
    state.add_experiment("e1", "e1", "w0", Lane.EXPLOIT, 1, "base", "bench", ExperimentStatus.LANDING)
    try:
        with LocalCluster(n_workers=1, processes=False, threads_per_worker=1, dashboard_address=None,
                          resources={"judge": 1}) as cluster, Client(cluster) as client:
            hosts = JudgeHosts(client, lab, ServedRepositories("/nowhere/t", "/nowhere/b"), ws.config,
                               threading.Event())
            job = hosts.job("e1", "e1", JudgeStep.CONFIRM, "bench", "main")
            with pytest.raises(JudgeHostGone, match="judge-gone .* has left the cluster; its confirm runs on no"):
                hosts.run(state, job, gone, lambda _: None)
            assert state.events_of(JudgeStarted) == []  # it started nowhere
            with pytest.raises(subprocess.CalledProcessError):
                hosts.pinned(gone, "e1").main_check(ws, state, "a" * 40, "b" * 40, None)
            (started,) = [e.event for e in state.events_of(JudgeStarted)]
            assert started.step == JudgeStep.MAIN_CHECK and started.judge.address in client.scheduler_info()["workers"]
            client.run(remove_scratch, lab)
    finally:
        state.close()
    assert not list(scratch_dir(lab).parent.glob(f"orchard-judge-{lab}-*"))
