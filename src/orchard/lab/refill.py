"""Refilling the backlog: the planner, started when open hypotheses fall below the free workers.

One plan runs at a time, on its own executor (never the workers'); a rejected answer stops
refilling for the rest of the run rather than asking again and again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchard.errors import OrchardError
from orchard.lab import planner
from orchard.lab.events import RefillStopped
from orchard.lab.experiment import ExperimentStatus
from orchard.lab.hypothesis import HypothesisStatus
from orchard.lab.slots import slots

if TYPE_CHECKING:
    from orchard.lab.loop import Lab

Status = ExperimentStatus


def refill(lab: Lab) -> None:
    """Start the planner when open hypotheses fall below the free workers (once at a time)."""
    if lab.planner_executor is None or lab.plan is not None or lab.refill_failed:
        return
    busy = {e.worker for e in lab.state.experiments(Status.STARTING, Status.RUNNING)}
    free = sum(1 for slot in slots(lab.ws) if slot.worker not in busy)
    if len(lab.state.hypotheses(HypothesisStatus.OPEN)) >= free:
        return
    try:
        lab.plan = planner.start_plan(lab.ws, lab.state, lab.planner_executor, say=lab.say)
    except OrchardError as error:
        _stopped(lab, str(error))


def collect_plan(lab: Lab) -> None:
    """Add a finished planner's hypotheses; a rejected answer stops refilling for this run."""
    run = lab.plan
    if lab.planner_executor is None or run is None:
        return
    for result in lab.planner_executor.poll():
        try:
            added = planner.finish_plan(lab.ws, lab.state, run, result)
            lab.say(f"planner {run.name}: added {', '.join(h.id for h in added)}")
        except OrchardError as error:
            _stopped(lab, str(error))
        lab.plan = None


def _stopped(lab: Lab, why: str) -> None:
    lab.refill_failed = True
    lab.state.log(RefillStopped(why))
    lab.say(f"backlog refill stopped for this run: {why}")

