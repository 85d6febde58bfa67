"""When the lab stops: each condition on one line, the first that holds is the reason.

The loop counters the conditions read (judgments, loops, idle loops in a
row, merges) are counted here too, in lab.db, so a resumed lab keeps them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from orchard.lab.db.running_time import ran_s
from orchard.lab.db.state import LabState
from orchard.lab.judge.measuring import MeasureProgress, VerdictWord, measure
from orchard.lab.loop import backlog
from orchard.lab.loop.start import recorded_start
from orchard.lab.notebook.spending import cost_text
from orchard.lab.records.db import JournalEvent
from orchard.lab.records.events import AgentHung, AgentRetried, EventKind, LabStopped, LauncherFailed
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import HypothesisStatus
from orchard.lab.records.measured_events import FinalVerdictTaken, Swept
from orchard.lab.records.steering_events import ExperimentStopped
from orchard.lab.workers.workspace.builds import baseline_binary
from orchard.lab.workers.workspace.workspace import Workspace

JUDGED, LANDED_IN_LOOP, LOOP, IDLE_LOOPS, MERGED = "judged", "landed_in_loop", "loop", "idle_loops", "merged"
LAUNCHER_FAILURES = "launcher_failures"
# A budget pauses the lab: no new worker starts, running ones finish; a higher budget resumes it.
RESUME = "`orchard run {root} --{flag} N` (or [stop] {key} in orchard.toml) raises it and resumes, the spend so far " \
         "kept"
# Who stops the running workers once a budget is overspent by [stop] hard_cap_factor (steering.py).
HARD_CAP = "the budget's hard cap"


@dataclass(frozen=True)
class BudgetUse:
    """What the lab has used of its budgets: every collected experiment's agent cost, and its wall time."""

    cost_usd: float
    estimated: bool  # some of the cost was worked out from tokens (config/prices.py)
    ran_s: float  # the time `orchard run` worked on the lab, across its runs (db/running_time.py)


def budget_use(state: LabState) -> BudgetUse:
    experiments = state.experiments()
    return BudgetUse(sum(e.cost_usd for e in experiments),
                     any(e.candidate.usage.estimated and e.cost_usd for e in experiments if e.candidate),
                     ran_s(state))


def past_hard_cap(ws: Workspace, state: LabState) -> str | None:
    """Which budget is used past `hard_cap_factor` times its limit, in words; None: neither."""
    stop, used = ws.config.stop, budget_use(state)
    factor = stop.hard_cap_factor
    if stop.max_cost_usd and used.cost_usd >= stop.max_cost_usd * factor:
        return (f"the agent cost, {cost_text(used.cost_usd, used.estimated)}, is past {factor:g} times its budget "
                f"of ${stop.max_cost_usd:g}")
    if stop.max_wall_minutes and used.ran_s / 60 >= stop.max_wall_minutes * factor:
        return (f"the wall time, {used.ran_s / 60:.1f} minutes, is past {factor:g} times its budget of "
                f"{stop.max_wall_minutes:g} minutes")
    return None


def _capped(state: LabState) -> str:
    """What the hard cap did since the lab last stopped, for the pause's reason."""
    stops = state.events_of(LabStopped)
    since = stops[-1].id if stops else 0
    stopped = [e for e in state.events_of(ExperimentStopped) if e.id > since and e.event.by.startswith(HARD_CAP)]
    if not stopped:
        return ""
    return (f"; past its hard cap ([stop] hard_cap_factor) the {len(stopped)} running worker(s) were stopped, "
            f"their hypotheses back in the backlog with no attempt counted "
            f"({', '.join(e.event.hypothesis for e in stopped)})")


def stop_reason(ws: Workspace, state: LabState, blocked: Collection[str] = (), *,
                planning: bool = False) -> str | None:
    """Why the lab should stop now, or None to go on.

    `blocked`: open hypotheses whose launcher (or launch) failed in this run. The wall-time
    budget counts the time the lab ran, across its runs (db/running_time.py), not the days between them.
    `planning`: a refill planner runs, so the backlog is about to grow.
    """
    stop = ws.config.stop
    experiments = state.experiments()
    used = budget_use(state)
    failures = state.counter(LAUNCHER_FAILURES)
    open_ids = {r.id for r in state.hypotheses(HypothesisStatus.OPEN)}
    active = bool(state.experiments(*ExperimentStatus.active()))
    recent = [e.judgment.verdict for e in experiments[-ws.config.workers.count:] if e.judgment]
    waited_minutes = sum(v.lock_wait_ms for v in recent if v is not None) / 60000
    idle_backlog = not open_ids and not active
    top = min(stop.top_attempted, len(state.hypotheses()))
    conditions = [
        (not planning and backlog.top_attempted(state, stop.top_attempted),
         f"the top {top} backlog items have all been attempted"),
        (failures >= stop.launcher_failures, failures_in_a_row(state, failures)),
        (state.counter(IDLE_LOOPS) >= stop.idle_loops, f"{stop.idle_loops} consecutive loops landed nothing"),
        (bool(stop.max_experiments) and len(experiments) >= stop.max_experiments,
         f"the budget of {stop.max_experiments} experiments is spent"),
        (bool(stop.max_wall_minutes) and used.ran_s / 60 >= stop.max_wall_minutes,
         f"paused: the wall-time budget of {stop.max_wall_minutes:g} minutes is spent (the lab ran "
         f"{used.ran_s / 60:.1f} minutes, across its runs){_capped(state)}; "
         f"{RESUME.format(root=ws.root, flag='max-wall-minutes', key='max_wall_minutes')}"),
        (bool(stop.max_cost_usd) and used.cost_usd >= stop.max_cost_usd,
         f"paused: the agent cost budget of ${stop.max_cost_usd:g} is spent "
         f"({cost_text(used.cost_usd, used.estimated)}){_capped(state)}; "
         f"{RESUME.format(root=ws.root, flag='max-cost-usd', key='max_cost_usd')}"),
        (waited_minutes >= stop.lock_wait_minutes, "sustained lock contention makes verdicts unreliable"),
        (not planning and idle_backlog, "the backlog is empty"),
        (bool(open_ids) and not active and open_ids <= set(blocked),
         "every open hypothesis needs a launcher that failed in this run or could not be launched "
         "(see the journal); fix it and run again"),
    ]
    return next((reason for holds, reason in conditions if holds), None)


def before_start(ws: Workspace, state: LabState) -> str | None:
    """Why a lab stops before it builds or measures anything: nothing to try, and no planner to add any."""
    if ws.config.workers.refill or state.hypotheses(HypothesisStatus.OPEN) or \
            state.experiments(*ExperimentStatus.active()):
        return None
    return (f"the backlog is empty: nothing was built or calibrated; add hypotheses (`orchard backlog add "
            f"{ws.root} --file FILE`, or `orchard plan {ws.root}`) and run again")


def failures_in_a_row(state: LabState, failures: int) -> str:
    """Why `failures` agent failures in a row stop the lab: a launcher that cannot work, or a pause while the
    agent's service is rate limited, overloaded or hanging (agent_retry.py)."""
    failed: list[JournalEvent[LauncherFailed | AgentRetried]] = [
        *state.events_of(LauncherFailed), *state.events_of(AgentRetried), *state.events_of(AgentHung)]
    events = sorted(failed, key=lambda e: e.id)
    last = events[-1] if events else None
    said = last.event.reason if last is not None else "-"
    if last is not None and isinstance(last.event, AgentRetried):
        return (f"paused after {failures} agent failures in a row (last: {said}); their hypotheses went back to "
                "the backlog: `orchard run` resumes once the agent's service answers again")
    return (f"{failures} launcher failures in a row (last: {said}); fix the agent CLI and run again: the hypotheses "
            "went back to the backlog")


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


def final_verdict(ws: Workspace, state: LabState, *, say: Callable[[str], None] = lambda _: None,
                  measure_progress: MeasureProgress | None = None) -> None:
    """Main at the end against main at the start: one paired verdict (same lock, same suite), once per pair.

    The lab's honest total: medians taken in different campaigns, at
    different loads, are never divided by each other. When the last full
    sweep measured main as it is now against the start, that verdict is
    this one, and is not measured twice.
    """
    started = recorded_start(state)
    if started is None:
        return
    start, end = started.base, ws.target_base()
    done = state.events_of(FinalVerdictTaken)
    if done and (done[-1].event.start, done[-1].event.end) == (start, end):
        return
    if end == start:
        state.log(FinalVerdictTaken(start, end, moved=False))
        return
    swept = [e.event for e in state.events_of(Swept)]
    if swept and swept[-1].main == end and swept[-1].verdict and swept[-1].verdict.verdict != VerdictWord.ERROR:
        say(f"final verdict: main {end[:12]} against main at the start {start[:12]}, as the last sweep measured "
            "this very pair")  # the sweep is that verdict: the same binaries, suite and lock, nothing since
        state.log(FinalVerdictTaken(start, end, moved=True, verdict=swept[-1].verdict))
        return
    say(f"final verdict: main {end[:12]} against main at the start {start[:12]}, paired")
    verdict = measure(ws, baseline_binary(ws, state, start), baseline_binary(ws, state, end),
                      progress=measure_progress)
    state.log(FinalVerdictTaken(start, end, moved=True, verdict=verdict))


def log_stop(state: LabState, reason: str) -> None:
    """Journal the stop, unless a finished lab was run again with nothing new to do (same stop, nothing since)."""
    stops = state.events_of(LabStopped)
    since = state.events(after=stops[-1].id) if stops else []
    repeated = bool(stops) and stops[-1].event.reason == reason and all(
        e.kind == EventKind.FINAL_VERDICT for e in since)
    if not repeated:
        state.log(LabStopped(reason))
