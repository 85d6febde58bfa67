"""The wall-time budget counts the time the lab ran, across resumes (issue 32's leftover).

On main `max_wall_minutes` counted from the lab's first start: a lab stopped one evening and resumed days later
with a modest budget paused again at once, its new hypotheses never tried. Now each `orchard run` adds the time
it worked on the lab to a total in lab.db (db/running_time.py), time paused by a person with nothing at work
is not counted, and the budget, `orchard status` and FINAL_REPORT read that total. No test sleeps: the days go by
in lab.db (the recorded first start moved back), and the clock a run counts with is a stand-in where it matters.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchard.lab.db.running_time import RunClock, add_ran, ran_s
from orchard.lab.db.state import LabState
from orchard.lab.loop import stop
from orchard.lab.loop.steering import Steering
from orchard.lab.records.events import LabStopped
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.records.steering_events import Paused, Resumed
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.test_steering import _Executor, _Lab, _orchard, _workspace

DAYS_AGO = 3 * 86400.0


def _hypothesis(state: LabState, name: str) -> None:
    state.add_hypothesis(Hypothesis(id=name, metric="out/stdout_bytes", change="shorter", scope=["src/alpha.txt"]),
                         source="user")


def _budget_used(ws: Workspace) -> float:
    code, said = _orchard("status", ws.root, "--json")
    assert code == 0, said
    return float(next(b for b in json.loads(said)["budgets"] if b["name"] == "max_wall_minutes")["used"])


def test_a_lab_first_started_days_ago_that_ran_ten_minutes_has_fifty_of_its_sixty_left(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, {"max_wall_minutes": 60})
    state = LabState.open(ws.root)
    try:
        _hypothesis(state, "h")
        state.set_meta("started_at", str(time.time() - DAYS_AGO))  # on main: 4320 minutes spent, paused at once
        add_ran(state, 10 * 60)
        assert stop.stop_reason(ws, state) is None
        assert _budget_used(ws) == 10.0
        add_ran(state, 51 * 60)  # now past it: the lab stops at once, naming the budget and what it ran
        assert stop.stop_reason(ws, state) == (
            "paused: the wall-time budget of 60 minutes is spent (the lab ran 61.0 minutes, across its runs); "
            f"`orchard run {ws.root} --max-wall-minutes N` (or [stop] max_wall_minutes in orchard.toml) raises it and "
            "resumes, the spend so far kept")
    finally:
        state.close()


class _Clock:
    """The monotonic clock a run counts with, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_lab_paused_overnight_with_nothing_at_work_spends_none_of_its_wall_time(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, {"max_wall_minutes": 60})
    state = LabState.open(ws.root)
    try:
        clock = _Clock()
        steering, lab = Steering(state, RunClock(clock)), _Lab(ws, state, _Executor("none at work"))
        clock.now += 60
        state.log(Paused("ana"))
        assert steering.steer(lab) is True  # the minute before the pause was seen counts
        clock.now += 12 * 3600  # the night, paused with nothing at work
        assert steering.steer(lab) is True
        state.log(Resumed("ana", ()))
        clock.now += 30
        assert steering.steer(lab) is False  # until the resume was seen: still the paused night
        clock.now += 120
        steering.steer(lab)
        assert ran_s(state) == 180.0
    finally:
        state.close()


class _FullOnce(LabState):
    """lab.db on a disk a worker filled: the first write of the running time fails as SQLite says it."""

    full = True

    def set_meta(self, key: str, value: str) -> None:
        if self.full:
            self.full = False
            raise sqlite3.OperationalError("database or disk is full")
        super().set_meta(key, value)


def test_a_full_disk_when_the_running_time_is_written_keeps_it_for_the_next_pass(tmp_path: Path) -> None:
    """A worker that fills the disk is the disk check's to stop (docs/loop.md): the lab goes on, no time lost."""
    ws = _workspace(tmp_path)
    state = _FullOnce.open(ws.root)
    try:
        clock = _Clock()
        steering, lab = Steering(state, RunClock(clock)), _Lab(ws, state, _Executor("none at work"))
        clock.now += 40
        assert steering.steer(lab) is False and ran_s(state) == 0.0  # not written, and not an error
        clock.now += 2
        steering.steer(lab)
        assert ran_s(state) == 42.0
    finally:
        state.close()


def test_a_lab_recorded_before_the_running_total_counts_to_its_last_stop_as_it_did(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    state = LabState.open(ws.root)
    try:
        assert ran_s(state) == 0.0  # never ran
        state.log(LabStopped("the backlog is empty"))
        state.set_meta("started_at", str(state.events_of(LabStopped)[-1].at - 1200))  # 20 minutes before its stop
        assert ran_s(state) == pytest.approx(1200.0)  # its first start to its stop, as main counted it
        before = ran_s(state)
        RunClock().check(state)  # its next run adds to that
        assert ran_s(state) >= before
    finally:
        state.close()


def _run(ws: Workspace, hypothesis: str) -> str:
    """`orchard backlog add` one hypothesis of the same shape, then `orchard run`: what the run printed. Each says
    its change in words of its own: the same words on the same scope as a killed one is a near-duplicate, refused."""
    toml = ws.root.parent / f"{hypothesis}.toml"
    toml.write_text(f'[[hypothesis]]\nid = "{hypothesis}"\nmetric = "out/stdout_bytes"\n'
                    f'change = "shorter, the {hypothesis} way"\nscope = ["src/alpha.txt"]\n')
    said = ""
    for args in (("backlog", "add", ws.root, "--file", toml), ("run", ws.root)):
        done = subprocess.run([sys.executable, "-m", "orchard", *map(str, args)], capture_output=True, text=True,
                              timeout=900, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        said = done.stdout + done.stderr
    return said


def _tried(ws: Workspace, hypothesis: str) -> bool:
    state = LabState.open_readonly(ws.root)
    try:
        return any(e.hypothesis == hypothesis for e in state.experiments())
    finally:
        state.close()


@pytest.mark.slow  # three `orchard run`s, the first two whole labs
@pytest.mark.timeout(1500)
def test_a_lab_resumed_days_after_its_first_start_runs_until_its_running_time_is_spent(tmp_path: Path) -> None:
    """On main the second run printed "paused: the wall-time budget of 60 minutes is spent (counted from the
    lab's first start)" and tried nothing."""
    ws = _workspace(tmp_path, {"max_wall_minutes": 60})
    first = _run(ws, "first")
    assert "wall-time budget" not in first and _tried(ws, "first"), first
    state = LabState.open(ws.root)
    try:
        ran = ran_s(state)
        assert 0 < ran < 3600, ran  # the first run's time is recorded
        state.set_meta("started_at", str(float(state.meta("started_at") or 0) - DAYS_AGO))  # three days ago
    finally:
        state.close()
    second = _run(ws, "second")
    assert "wall-time budget" not in second and _tried(ws, "second"), second
    state = LabState.open(ws.root)
    try:
        assert ran < ran_s(state) < 3600  # the second run added its own time, not the three days
        add_ran(state, 3600)  # as if the two runs had taken an hour more
    finally:
        state.close()
    third = _run(ws, "third")
    assert "stopped: paused: the wall-time budget of 60 minutes is spent (the lab ran " in third, third
    assert not _tried(ws, "third")
