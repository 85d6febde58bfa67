"""The final report's account of each judge host (issue 24): its verdicts, its wins and what landed, the steps
lost with it, and the A/A calibration its verdicts were measured against."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from orchard.bench.deciding.verdict import CalibrationNote
from orchard.lab.db.state import LabState
from orchard.lab.notebook import files as records
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import Hypothesis, Lane
from orchard.lab.records.judge_host import JudgeHost, JudgeLost, JudgeStarted, JudgeStep
from orchard.lab.records.judgment import Decision, Judgment
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.loop_support import metric, verdict_of

A = JudgeHost("judge-a", "tcp://10.0.0.2:4001")
B = JudgeHost("judge-b", "tcp://10.0.0.6:4001")


def _calibrated(runs: int, machine: str, floor: float) -> Judgment:
    verdict = verdict_of([metric("report/wall_ms", "improved", -0.4, floor=floor)])
    note = CalibrationNote(cached=True, age_s=60.0, runs=runs, seed=7, machine_fingerprint=machine)
    return Judgment(Decision.LAND, ("wall_ms improved",), verdict=replace(verdict, calibration=note))


def test_the_final_report_gives_each_judge_host_its_verdicts_wins_losses_and_calibration(
        make_workspace: Callable[..., Workspace]) -> None:
    ws = make_workspace()
    state = LabState.open(ws.root)
    try:
        judged = {"e1": (replace(_calibrated(12, "machine-a", 0.031), judge=A), "m" * 40),  # A's win, landed
                  "e2": (Judgment(Decision.KILL, ("scope",), judge=B), None),  # refused before it was measured
                  "e3": (replace(_calibrated(30, "machine-b", 0.043), judge=B), None),  # B's win, its host lost
                  "e4": (Judgment(Decision.KILL, ("no effect",)), None)}  # judged here before the hosts joined
        for name, (judgment, merge) in judged.items():
            state.add_hypothesis(Hypothesis(metric="report/wall_ms", change=name, id=name), source="user")
            state.add_experiment(name, name, "w0", Lane.EXPLOIT, 1, "base", "bench", ExperimentStatus.DONE)
            state.update_experiment(name, judgment=judgment, decision=judgment.decision, merge_commit=merge)
        for judge, step, name in ((A, JudgeStep.VERDICT, "e1"), (B, JudgeStep.VERDICT, "e2"),
                                  (B, JudgeStep.VERDICT, "e3"), (A, JudgeStep.REBASE, "e1"),
                                  (A, JudgeStep.CONFIRM, "e1"), (A, JudgeStep.MAIN_CHECK, "e1"),
                                  (B, JudgeStep.CONFIRM, "e3")):
            state.log(JudgeStarted(judge, step), name)
        state.log(JudgeLost(B, JudgeStep.CONFIRM, f"e3: its judge host {B.label} has left the cluster"), "e3")
        records.write_notebook(ws, state, final=True)
    finally:
        state.close()
    html = (ws.root / "report.html").read_text()  # and under its summary, as on the dashboard
    assert f"<p class=muted>judge host {A.label}: verdicts run 2, landing steps 2," in html
    report = (ws.root / "FINAL_REPORT.md").read_text()
    section = report.split("## Judge hosts\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert section == [
        f"- judge host {A.label}: verdicts run 2, landing steps 2, candidates judged 1 (wins 1, landed 1), steps "
        "lost 0; calibration: 12 A/A pairs on machine machine-a, floors report/wall_ms 3.10%",
        f"- judge host {B.label}: verdicts run 2, landing steps 1, candidates judged 2 (wins 1, landed 0), steps "
        f"lost 1 (e3: its judge host {B.label} has left the cluster); calibration: 30 A/A pairs on machine "
        "machine-b, floors report/wall_ms 4.30%"], report

