"""Refilling the backlog: the planner, started when open hypotheses fall below the free workers.

One plan runs at a time, on its own executor (never the workers'); a rejected answer stops
refilling for the rest of the run rather than asking again and again.
"""

from __future__ import annotations

from collections.abc import Callable

from orchard.errors import OrchardError
from orchard.lab.db.state import LabState
from orchard.lab.loop import planner
from orchard.lab.loop.slots import slots
from orchard.lab.records.events import RefillStopped
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import HypothesisStatus
from orchard.lab.workers.executors import ProcessExecutor
from orchard.lab.workers.workspace.workspace import Workspace

Status = ExperimentStatus


class Refill:
    """The loop's planner: its executor (None: `workers.refill` is off), the plan running, whether it stopped."""

    def __init__(self, executor: ProcessExecutor | None = None) -> None:
        self.executor = executor
        self.plan: planner.PlanRun | None = None
        self.failed = False

    def start(self, ws: Workspace, state: LabState, say: Callable[[str], None]) -> None:
        """Start the planner when open hypotheses fall below the free workers (once at a time)."""
        if self.executor is None or self.plan is not None or self.failed:
            return
        busy = {e.worker for e in state.experiments(Status.STARTING, Status.RUNNING)}
        free = sum(1 for slot in slots(ws) if slot.worker not in busy)
        if len(state.hypotheses(HypothesisStatus.OPEN)) >= free:
            return
        try:
            self.plan = planner.start_plan(ws, state, self.executor, say=say)
        except OrchardError as error:
            self._stopped(state, say, str(error))

    def collect(self, ws: Workspace, state: LabState, say: Callable[[str], None]) -> None:
        """Add a finished planner's hypotheses; a rejected answer stops refilling for this run."""
        run = self.plan
        if self.executor is None or run is None:
            return
        for result in self.executor.poll():
            try:
                added = planner.finish_plan(ws, state, run, result, say=say)
                say(f"planner {run.name}: added {', '.join(h.id for h in added)}")
            except OrchardError as error:
                self._stopped(state, say, str(error))
            self.plan = None

    def _stopped(self, state: LabState, say: Callable[[str], None], why: str) -> None:
        self.failed = True
        state.log(RefillStopped(why))
        say(f"backlog refill stopped for this run: {why}")
