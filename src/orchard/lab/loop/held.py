"""Held wins: the wins the hack review doubted, waiting for a person (`orchard review`).

A held win is judged LAND but not landed (`ExperimentStatus.HELD`): nothing
of it reaches main until a person reads its flags and settles it. `--land`
journals who asked and continues the normal landing from where it was held
(commit, rebase and judgment again on a moved main, confirmation, main's
pin checks, merge): by the running lab when one runs, else here, under the
workspace's lock. `--kill` journals who asked and kills it, its hypothesis
with it. Landing refuses a held win no `WinSettled` of this experiment
lands (`landing/land_checks.py`).
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable
from dataclasses import dataclass

from orchard.errors import UsageError
from orchard.lab.db import workspace_lock
from orchard.lab.db.state import LabState
from orchard.lab.landing import land as landing
from orchard.lab.loop import landed
from orchard.lab.notebook import files as notebook
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hack_findings import Finding, Settlement, WinSettled
from orchard.lab.records.hypothesis import HypothesisStatus
from orchard.lab.records.judgment import Decision
from orchard.lab.workers.workspace.workspace import Workspace


@dataclass(frozen=True)
class HeldWin:
    """One held win as `orchard review` lists it."""

    experiment: str
    hypothesis: str
    title: str
    findings: tuple[Finding, ...]


def held_wins(state: LabState) -> list[HeldWin]:
    """Every win waiting for a person, oldest first."""
    wins = []
    for record in state.experiments(ExperimentStatus.HELD):
        findings = () if record.judgment is None else record.judgment.findings
        title = state.hypothesis(record.hypothesis).hypothesis.title
        wins.append(HeldWin(record.name, record.hypothesis, title, findings))
    return wins


def settle(ws: Workspace, state: LabState, experiment: str, settlement: Settlement, by: str,
           say: Callable[[str], None] = lambda _: None) -> str:
    """Land or kill a held win, journaled with who asked; what became of it, in one line."""
    try:
        record = state.experiment(experiment)
    except KeyError:
        raise UsageError(f"{experiment}: no such experiment in {ws.root}") from None
    if record.status != ExperimentStatus.HELD or record.judgment is None:
        raise UsageError(f"{experiment} is not held for review (it is {record.status}); "
                         f"`orchard review {ws.root}` lists the held wins")
    if settlement == Settlement.KILL:
        reasons = [*record.reasons, f"killed in review by {by}: "
                   + "; ".join(f.describe() for f in record.judgment.findings)]
        with state.transaction():
            state.log(WinSettled(settlement, by), experiment)
            state.update_experiment(experiment, status=ExperimentStatus.DONE, decision=Decision.KILL, reasons=reasons)
            state.update_hypothesis(record.hypothesis, status=HypothesisStatus.KILLED)
        if record.judgment.checkout:
            shutil.rmtree(record.judgment.checkout, ignore_errors=True)
        notebook.write_notebook(ws, state)
        return f"{experiment}: KILLed in review by {by}"
    with state.transaction():
        state.log(WinSettled(settlement, by), experiment)
        state.update_experiment(experiment, status=ExperimentStatus.LANDING)
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(workspace_lock.hold(ws.root))
        except UsageError:  # a lab runs on the workspace: its loop lands every LANDING experiment
            return f"{experiment}: landing, by the lab running on {ws.root} (asked by {by})"
        hypothesis = state.hypothesis(record.hypothesis).hypothesis
        outcome = landing.land(ws, state, state.experiment(experiment), record.judgment, hypothesis, progress=say)
        _, said = landed.record(state, state.experiment(experiment), outcome, revisits=ws.config.workers.revisit)
    notebook.write_notebook(ws, state)
    return said
