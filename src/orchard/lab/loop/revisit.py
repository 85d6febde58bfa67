"""Revisiting a kill: a KILLed hypothesis offered again, once, when a win made its kill stale.

A kill measured one idea against one main. A later win can change that: it edits a file the idea was about
(the hypothesis's scope, or a file its killed candidate changed), or it moves main's value of the idea's metric
by more than the effect the idea was measured at (and more than that metric's noise floor). Then the hypothesis
goes back to the backlog, open and ranked as usual, journaled as `Revisited`. Never twice for one hypothesis,
and never a kill about the candidate rather than the idea (`ABOUT_THE_CANDIDATE`, or a person's kill): a
worker that tampered, strayed or gamed the bench did not fail because of main. docs/loop.md's table of the hard
rules says which kills come back, and "Revisiting a kill" when.
"""

from __future__ import annotations

from orchard.lab.db.ranking import revisited
from orchard.lab.db.state import LabState
from orchard.lab.records.db import ExperimentRecord, HypothesisRecord
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import HypothesisStatus, in_scope
from orchard.lab.records.judgment import Decision, JudgmentEntry, Rule
from orchard.lab.records.revisit_events import Revisited

# The hard rules a candidate breaks by what it did, whatever main it was tried on: tampering, straying, a refused
# change, gaming the bench, changing or closing what the judge measures. A kill under one is never revisited.
ABOUT_THE_CANDIDATE = frozenset({
    Rule.HARNESS, Rule.SCOPE, Rule.TESTS_KEPT, Rule.ADMISSIBLE, Rule.GATES, Rule.PLAUSIBLE, Rule.HACK_REVIEW,
    Rule.DIFFERENTIAL, Rule.REVIEW, Rule.AS_BUILT, Rule.OPEN_TREE})


def after_win(state: LabState, win: ExperimentRecord) -> list[Revisited]:
    """Offer again every KILLed hypothesis this merged win made worth another try; returns what was journaled."""
    done = revisited(state)
    kills = {e.hypothesis: e for e in state.experiments(ExperimentStatus.DONE, decision=Decision.KILL)}
    changed = [] if win.candidate is None else win.candidate.changed_files
    found = []
    for record in state.hypotheses(HypothesisStatus.KILLED):
        kill = kills.get(record.id)  # the latest: experiments come oldest first
        if record.id in done or kill is None or not _revisitable(kill):
            continue
        red_tests = kill.judgment is not None and kill.judgment.rule == Rule.TESTS
        because = _files_reason(record, kill, changed, win.name) or (
            None if red_tests else _moved_reason(state, record, kill))
        if because is None:
            continue
        event = Revisited(record.id, kill.name, win.name, because)
        with state.transaction():
            state.update_hypothesis(record.id, status=HypothesisStatus.OPEN)
            state.log(event, win.name)
        found.append(event)
    return found


def _revisitable(kill: ExperimentRecord) -> bool:
    """A kill the judge decided about the idea against that main, which a changed main may undo. A person's kill
    has no KILL judgment: `orchard stop --kill` none, `orchard review --kill` the held win's LAND (the hack
    review's doubtful finding); a definite finding is `no-benchmark-gaming`, about the candidate."""
    judgment = kill.judgment
    return judgment is not None and judgment.decision == Decision.KILL and judgment.rule not in ABOUT_THE_CANDIDATE


def _files_reason(record: HypothesisRecord, kill: ExperimentRecord, changed: list[str], win: str) -> str | None:
    """Why the win's files matter to the hypothesis: in its scope (an empty scope names none), or its candidate's."""
    scope = record.hypothesis.scope
    touched = [] if kill.candidate is None else kill.candidate.changed_files
    shared = [path for path in changed if (scope and in_scope(path, scope)) or path in touched]
    if not shared:
        return None
    return f"the win {win} changed {', '.join(shared[:3])}{' ...' if len(shared) > 3 else ''}, which it was about"


def _moved_reason(state: LabState, record: HypothesisRecord, kill: ExperimentRecord) -> str | None:
    """Why main's move matters: its metric moved since the kill by more than the effect the kill measured, and
    by more than that metric's noise floor (main's medians wander by noise alone: a move within it is none).
    Never asked of a kill for red tests: a faster main does not mend a change that broke them."""
    metric = record.hypothesis.metric
    verdict = kill.judgment.verdict if kill.judgment is not None else None
    measured = next((m for m in (verdict.metrics if verdict else []) if metric in (m.key, m.metric)), None)
    killed_at = next((e.at for e in state.events_of(JudgmentEntry) if e.experiment == kill.name), None)
    if measured is None or measured.effect is None or killed_at is None:
        return None
    values = [(m.at, value) for m in state.measurements("main") for key, value in m.metrics.items()
              if metric in (key, key.split("/", 1)[-1]) and value is not None]
    then = [value for at, value in values if at <= killed_at]
    if not then or then[-1] == 0:
        return None
    moved = values[-1][1] / then[-1] - 1
    if abs(moved) <= max(abs(measured.effect), measured.floor):
        return None
    return (f"main moved {moved:+.1%} on {metric} since it was killed, more than the {measured.effect:+.1%} "
            f"it was measured at and its {measured.floor:.1%} floor")
