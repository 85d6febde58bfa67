"""A landing's outcome recorded: the experiment done, its branch and commits, a kept win counted and the kills
it made stale offered again (revisit.py); or a win whose judge host left before its merge, sent back to be
judged again.

The loop's landing thread and `orchard review --land` (a held win landed by a person while no lab runs)
both end a landing here, so lab.db and the loop's counters read the same whichever started it.
"""

from __future__ import annotations

from orchard.lab.db.state import LabState
from orchard.lab.landing.land import LandOutcome
from orchard.lab.loop import revisit, stop
from orchard.lab.records.db import ExperimentRecord
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import HypothesisStatus
from orchard.lab.records.judge_host import JudgeLost


def record(state: LabState, experiment: ExperimentRecord, outcome: LandOutcome, *,
           revisits: bool) -> tuple[bool, str]:
    """Record how the landing ended; (whether main kept the win, the line that says where it went). `revisits`:
    `[workers] revisit`, whether a kept win offers the kills it made stale again."""
    reasons = list(experiment.reasons) + outcome.notes
    won = outcome.merged and not outcome.reverted
    with state.transaction():
        state.update_experiment(experiment.name, status=ExperimentStatus.DONE, branch=outcome.branch,
                                land_commit=outcome.commit, merge_commit=outcome.merge_commit, reasons=reasons)
        if won:
            state.set_counter(stop.MERGED, state.counter(stop.MERGED) + 1)
        offered = revisit.after_win(state, experiment) if won and revisits else []
    merged = "branch kept, not merged"
    if won:
        merged = "merged into main" + ("" if outcome.published else ", NOT published to the target")
    again = "".join(f"; revisited {event.hypothesis}: {event.because}" for event in offered)
    return won, f"{experiment.name}: landed on {outcome.branch} ({merged}){again}"


def judge_again(state: LabState, experiment: ExperimentRecord, lost: JudgeLost) -> str:
    """A win whose judge host left before its merge: judged again from scratch, on another judge host."""
    with state.transaction():
        state.update_experiment(experiment.name, status=ExperimentStatus.COLLECTED, judgment=None, decision=None,
                                reasons=[lost.reason])
        state.update_hypothesis(experiment.hypothesis, status=HypothesisStatus.RUNNING)
        state.log(lost, experiment.name)
    return f"{lost.reason}: judged again from scratch on another judge host"
