"""When the lab stops: each condition on one line, the first that holds is the reason.

The loop counters the conditions read (judgments, loops, idle loops in a
row, merges) are counted here too, in lab.db, so a resumed lab keeps them.
"""

from __future__ import annotations

from orchard.lab import backlog
from orchard.lab.experiment import ExperimentStatus
from orchard.lab.hypothesis import HypothesisStatus
from orchard.lab.state import LabState
from orchard.lab.workspace import Workspace

JUDGED, LANDED_IN_LOOP, LOOP, IDLE_LOOPS, MERGED = "judged", "landed_in_loop", "loop", "idle_loops", "merged"


def stop_reason(ws: Workspace, state: LabState, elapsed_s: float) -> str | None:
    """Why the lab should stop now, or None to go on."""
    stop = ws.config.stop
    experiments = state.experiments()
    cost = sum(e.cost_usd for e in experiments)
    recent = [e.judgment.verdict for e in experiments[-ws.config.workers.count:] if e.judgment]
    waited_minutes = sum(v.lock_wait_ms for v in recent if v is not None) / 60000
    idle_backlog = not state.hypotheses(HypothesisStatus.OPEN) and not state.experiments(*ExperimentStatus.active())
    conditions = [
        (backlog.top_attempted(state, stop.top_attempted),
         f"the top {stop.top_attempted} backlog items have all been attempted"),
        (state.counter(IDLE_LOOPS) >= stop.idle_loops, f"{stop.idle_loops} consecutive loops landed nothing"),
        (bool(stop.max_experiments) and len(experiments) >= stop.max_experiments,
         f"the budget of {stop.max_experiments} experiments is spent"),
        (bool(stop.max_wall_minutes) and elapsed_s / 60 >= stop.max_wall_minutes,
         f"the wall-time budget of {stop.max_wall_minutes:g} minutes is spent"),
        (bool(stop.max_cost_usd) and cost >= stop.max_cost_usd,
         f"the agent cost budget of ${stop.max_cost_usd:g} is spent (${cost:.2f})"),
        (waited_minutes >= stop.lock_wait_minutes, "sustained lock contention makes verdicts unreliable"),
        (idle_backlog, "the backlog is empty"),
    ]
    return next((reason for holds, reason in conditions if holds), None)


def count_judged(state: LabState, workers: int, landed: bool) -> None:
    """A loop is one round of `workers` judgments; count the idle ones in a row."""
    judged = state.counter(JUDGED) + 1
    landed_in_loop = state.counter(LANDED_IN_LOOP) + int(landed)
    state.set_counter(JUDGED, judged)
    state.set_counter(LANDED_IN_LOOP, landed_in_loop)
    if judged % workers == 0:
        state.set_counter(LOOP, state.counter(LOOP) + 1)
        state.set_counter(IDLE_LOOPS, 0 if landed_in_loop else state.counter(IDLE_LOOPS) + 1)
        state.set_counter(LANDED_IN_LOOP, 0)
