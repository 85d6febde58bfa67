"""Collecting an ended worker: its candidate read and recorded in lab.db, or why it could not be.

A worker whose agent could not work at all (its launcher failed and it changed nothing) is not
a candidate: its hypothesis goes back to the backlog and its launcher is given no more work
in this run. Local and dask workers are collected alike; a dask worker whose host failed around it
(its checkouts could not be made, or dask lost every worker that ran it) is treated as a worker
that could not be launched: its hypothesis goes back to the backlog, never KILLed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from orchard.errors import OrchardError
from orchard.lab.judge.candidate import collect_candidate, from_remote
from orchard.lab.loop import agent_retry, stop
from orchard.lab.loop.driver import Driver
from orchard.lab.loop.isolation import Stage
from orchard.lab.records.candidate import Candidate, Flag
from orchard.lab.records.db import ExperimentRecord
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import HypothesisStatus
from orchard.lab.workers.executors import JobResult
from orchard.lab.workers.executors.dask import DaskExecutor
from orchard.lab.workers.remote import RemoteOutcome

Status = ExperimentStatus


def collect(lab: Driver) -> None:
    assert lab.executor is not None
    if isinstance(lab.executor, DaskExecutor):
        for placement in lab.executor.placements():
            lab.state.log("experiment-host", {"host": placement.host, "address": placement.address,
                                              "requeued_from": placement.lost_on}, placement.experiment)
            if placement.lost_on:
                lab.say(f"{placement.experiment}: its dask worker {placement.lost_on} was lost; "
                        f"re-queued on {placement.host} ({placement.address})")
        for outcome in lab.executor.poll():
            _collect_remote(lab, outcome)
        return
    for result in lab.executor.poll():
        collect_result(lab, result)


def collect_result(lab: Driver, result: JobResult) -> None:
    record = lab.state.experiment(result.name)
    candidate = _collected(lab, record, lambda: collect_candidate(lab.ws, lab.experiment(record), result,
                                                                  lab.launcher(record)))
    if candidate is not None:
        flags = ", ".join(candidate.flags) or "none"
        lab.say(f"{record.name}: worker ended (exit {result.exit_code}); flags: {flags}")


def _collect_remote(lab: Driver, outcome: RemoteOutcome) -> None:
    record = lab.state.experiment(outcome.name)
    if outcome.host_failed:  # like a local worker that could not be launched: back to the backlog, not KILLed
        lab.failed(record, Stage.LAUNCH, OrchardError(f"on dask worker {outcome.where}: {outcome.error}"))
        return
    candidate = _collected(lab, record, lambda: from_remote(lab.ws, lab.experiment(record), outcome,
                                                            lab.launcher(record)))
    if candidate is not None:
        ended = f"exit {outcome.exit_code}" if outcome.error is None else outcome.error
        lab.say(f"{record.name}: worker ended on {candidate.host} ({ended}); "
                f"flags: {', '.join(candidate.flags) or 'none'}")


def _collected(lab: Driver, record: ExperimentRecord, read: Callable[[], Candidate]) -> Candidate | None:
    """Read the ended worker's candidate and record it; None when its agent could not work or collection failed."""
    if record.status not in (Status.STARTING, Status.RUNNING):
        return None  # its end is recorded already (its launch failed after the worker started)
    try:
        candidate = read()
        if agent_retry.handled(lab, record, candidate):
            return None
        ended = candidate.agent_error is not None and candidate.agent_error.ends_experiment  # judged: KILL
        if candidate.launcher_failure is not None and Flag.NO_CHANGES in candidate.flags and not ended:
            _launcher_failed(lab, record, candidate)
            return None
        lab.state.update_experiment(record.name, status=Status.COLLECTED, candidate=candidate,
                                    finished_at=time.time())
        return candidate
    except Exception as error:
        lab.failed(record, Stage.COLLECT, error)
        return None


def _launcher_failed(lab: Driver, record: ExperimentRecord, candidate: Candidate) -> None:
    """The agent could not work at all: its own message is the reason, the hypothesis goes back to the backlog."""
    reason = f"launcher {candidate.launcher} failed: {candidate.launcher_failure}"
    with lab.state.transaction():
        lab.state.update_experiment(record.name, status=Status.DONE, candidate=candidate,
                                    finished_at=time.time(), reasons=[reason])
        lab.state.update_hypothesis(record.hypothesis, status=HypothesisStatus.OPEN)
        lab.state.log("launcher-failure", {"hypothesis": record.hypothesis, "launcher": candidate.launcher,
                                           "exit_code": candidate.exit_code, "reason": reason,
                                           "log": candidate.log_path}, record.name)
        lab.state.set_counter(stop.LAUNCHER_FAILURES, lab.state.counter(stop.LAUNCHER_FAILURES) + 1)
    lab.launcher_down(lab.state.hypothesis(record.hypothesis).hypothesis.launcher)
    lab.say(f"{record.name}: {reason}; {record.hypothesis} goes back to the backlog")
    lab.render()

