"""The smaller things a real run showed: each as the user met it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from orchard.lab.db.running_time import add_ran
from orchard.lab.db.state import LabState
from orchard.lab.loop import stop
from orchard.lab.notebook import backlog_file, view
from orchard.lab.notebook import files as records
from orchard.lab.notebook.journal import render_journal
from orchard.lab.records.hypothesis import HypothesisStatus
from orchard.lab.records.judgment import Decision, Judgment, JudgmentEntry
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.loop_support import add_hypotheses, verdict_of


def test_a_small_predicted_effect_is_not_shown_as_minus_zero(lab_state: LabState) -> None:
    add_hypotheses(lab_state, {"id": "tiny", "scope": ["a.py"], "predicted_effect": -0.005},
                   {"id": "big", "scope": ["b.py"], "predicted_effect": -0.3})
    text = backlog_file.render(lab_state)
    assert "-0.5%" in text and "-30%" in text and "-0%" not in text


def test_the_stop_message_counts_the_hypotheses_that_exist(make_workspace: Callable[..., Workspace]) -> None:
    ws = make_workspace("[stop]\ntop_attempted = 8\n")
    state = LabState.open(ws.root)
    try:
        ids = add_hypotheses(state, *({"id": f"h{i}", "scope": [f"f{i}.py"]} for i in range(6)))
        for hypothesis_id in ids:
            state.update_hypothesis(hypothesis_id, status=HypothesisStatus.KILLED, attempt=True)
        assert stop.stop_reason(ws, state) == "the top 6 backlog items have all been attempted"
    finally:
        state.close()


def test_the_wall_time_budget_keeps_the_time_earlier_runs_ran_not_only_this_process(
    make_workspace: Callable[..., Workspace]
) -> None:
    ws = make_workspace("[stop]\nmax_wall_minutes = 30\n")
    state = LabState.open(ws.root)
    try:
        add_hypotheses(state, {"id": "h", "scope": ["f.py"]})
        add_ran(state, 3600)  # the lab ran an hour, then was resumed
        assert stop.stop_reason(ws, state) == (
            "paused: the wall-time budget of 30 minutes is spent (the lab ran 60.0 minutes, across its runs); "
            f"`orchard run {ws.root} --max-wall-minutes N` (or [stop] max_wall_minutes in orchard.toml) raises it and "
            "resumes, the spend so far kept")
        ws.config = dataclasses.replace(ws.config, stop=dataclasses.replace(ws.config.stop, max_wall_minutes=120))
        assert stop.stop_reason(ws, state) is None  # a higher budget resumes it, the hour kept
    finally:
        state.close()


def test_a_gate_failing_in_the_warm_up_says_so_and_killed_bullets_name_the_id_once(
        make_workspace: Callable[..., Workspace]) -> None:
    ws = make_workspace()
    lab_state = LabState.open(ws.root)
    try:
        add_hypotheses(lab_state, {"id": "top-ten", "scope": ["a.py"]})
        gate_kill = verdict_of([], [("information_recall", False, "missing 'total words'")])
        assert gate_kill.pairs == 0
        reasons = ["quality gate information_recall failed"]
        lab_state.add_experiment("top-ten", "top-ten", "w1", "exploit", 1, "a" * 40, "b" * 40, "running")
        lab_state.update_experiment("top-ten", status="done", decision="KILL", reasons=reasons,
                                    judgment=Judgment(Decision.KILL, tuple(reasons), verdict=gate_kill))
        lab_state.log(JudgmentEntry("top-ten", "top ten", Decision.KILL, tuple(reasons), verdict=gate_kill), "top-ten")
        journal = render_journal(lab_state)
        report = records.render_final_report(view.build(ws, lab_state, live=False))
    finally:
        lab_state.close()
    assert "after the warm-up pair" in journal and "after 0 pairs" not in journal
    assert "- `top-ten`: quality gate information_recall failed" in report
    assert "(hypothesis `top-ten`)" not in report
