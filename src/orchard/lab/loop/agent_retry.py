"""An agent that failed for a reason outside its hypothesis: the hypothesis goes back, the agent waits.

The endpoint's fault is never the hypothesis's. A rate limit, an overloaded
service or an endpoint that cannot be reached (`AgentErrorKind.endpoint_fault`,
in the CLI's own words, also while it was still retrying), or a worker whose
model never answered at all (no assistant output, no usage: timed out, hung or
exited), says nothing about the idea being tried: the experiment is not judged,
its hypothesis goes back to the backlog with no attempt counted, and its
launcher gets no new work for `[workers] retry_minutes`, doubled for each such
failure in a row. Its reason names the endpoint and what it answered. Only a
worker whose model did work can be judged timed out: one that printed no
result is taken for a hung agent once (its hypothesis goes back once), and is
judged the next time. Each counts as a launcher failure in a row, so `[stop]
launcher_failures` of them pause the lab (the run ends, saying so, in
`orchard status` too) instead of burning the backlog; `orchard run` resumes.
"""

from __future__ import annotations

import time
from collections.abc import Hashable

from orchard.lab.config.sections import OFFLINE_LAUNCHERS
from orchard.lab.db.state import LabState
from orchard.lab.loop import stop
from orchard.lab.loop.driver import Driver
from orchard.lab.records.candidate import Candidate, Flag
from orchard.lab.records.db import ExperimentRecord
from orchard.lab.records.events import AgentHung, AgentRetried
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import HypothesisStatus

MAX_WAIT_S = 3600.0


class Agents:
    """The launchers whose agent failed in this run: down (no more work in this run) or waiting until a time."""

    def __init__(self, first_wait_s: float) -> None:
        self.first_wait_s = first_wait_s
        self.down: set[str] = set()
        self.until: dict[str, float] = {}

    def wait(self, launcher: str, in_a_row: int) -> float:
        """Hold `launcher`'s work back after its `in_a_row`-th failure in a row; returns the wait in seconds."""
        wait_s = min(self.first_wait_s * 2.0 ** max(in_a_row - 1, 0), MAX_WAIT_S)
        self.until[launcher] = time.monotonic() + wait_s
        return wait_s

    def waiting(self) -> frozenset[str]:
        now = time.monotonic()
        return frozenset(name for name, until in self.until.items() if until > now)

    def held(self, state: LabState, blocked: set[str]) -> set[str]:
        """`blocked` and the open hypotheses whose launcher is waiting."""
        waiting = self.waiting()
        if not waiting:
            return blocked
        return blocked | {r.id for r in state.hypotheses(HypothesisStatus.OPEN) if r.hypothesis.launcher in waiting}

    def state(self) -> Hashable:
        """What the loop's decisions read of it (a wait running out changes it)."""
        return frozenset(self.down), self.waiting()


def endpoint_fault(lab: Driver, record: ExperimentRecord, candidate: Candidate) -> str | None:
    """Why the endpoint, not the hypothesis, ended this worker (naming the endpoint and what it answered); None
    when its model worked, or its CLI cannot tell."""
    url = lab.launcher(record).base_url() or "its endpoint"
    error = candidate.agent_error
    if error is not None and error.endpoint_fault:
        return f"agent {error}: {candidate.launcher_failure} (endpoint {url})"
    if error is not None or candidate.model_answered is not False:
        return None
    minutes = lab.ws.config.workers.timeout_minutes
    ended = (f"timed out after {minutes:g} minutes and its CLI's own retries" if Flag.TIMED_OUT in candidate.flags
             else f"exited {candidate.exit_code}")
    return f"agent got no answer: {url} sent nothing from its model (the worker {ended})"


def hung(lab: Driver, record: ExperimentRecord, candidate: Candidate) -> bool:
    """An agent worker whose model worked but that timed out without printing a result, the first time for its
    hypothesis."""
    launcher = lab.launcher(record)
    return (Flag.TIMED_OUT in candidate.flags and launcher.name not in OFFLINE_LAUNCHERS
            and candidate.usage.source is None
            and not any(e.event.hypothesis == record.hypothesis for e in lab.state.events_of(AgentHung)))


def handled(lab: Driver, record: ExperimentRecord, candidate: Candidate) -> bool:
    """Send the hypothesis back when its endpoint failed or its agent hung; False for anything else."""
    minutes = lab.ws.config.workers.timeout_minutes
    fault = endpoint_fault(lab, record, candidate)
    if fault is not None:
        event, reason = AgentRetried, fault
    elif hung(lab, record, candidate):
        event, reason = AgentHung, (f"agent hung: no result within the worker timeout ({minutes:g} minutes); "
                               "its hypothesis goes back to the backlog once")
    else:
        return False
    launcher = lab.state.hypothesis(record.hypothesis).hypothesis.launcher
    with lab.state.transaction():
        in_a_row = lab.state.counter(stop.LAUNCHER_FAILURES) + 1
        lab.state.set_counter(stop.LAUNCHER_FAILURES, in_a_row)
        wait_s = lab.launcher_wait(launcher, in_a_row) if event is AgentRetried else 0.0
        lab.state.update_experiment(record.name, status=ExperimentStatus.DONE, candidate=candidate,
                                    finished_at=time.time(), reasons=[reason])
        lab.state.update_hypothesis(record.hypothesis, status=HypothesisStatus.OPEN)
        lab.state.log(event(record.hypothesis, candidate.launcher, reason, round(wait_s, 1), in_a_row,
                            candidate.log_path), record.name)
    later = f"; tried again in {wait_s:.0f} s at the earliest" if wait_s else ""
    lab.say(f"{record.name}: {reason}; {record.hypothesis} goes back to the backlog{later}")
    lab.render()
    return True
