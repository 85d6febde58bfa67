"""Collecting an ended worker: its candidate read and recorded in lab.db, or why it could not be.

A worker whose agent could not work at all (its launcher failed and it changed nothing) is not
a candidate: its hypothesis goes back to the backlog and its launcher is given no more work
in this run. Every executor's workers are collected alike (`candidate.collect_candidate`); a worker
whose host failed around it (a dask worker whose checkouts could not be made, or every dask worker
that ran it lost) is treated as a worker that could not be launched: its hypothesis goes back to the
backlog, never KILLed. A worker its dask host stopped over `[workers] max_checkout_mb` is KILLed with
that reason, as a local one is (`disk_limits.py`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from orchard.errors import OrchardError
from orchard.lab.judge.candidate import collect_candidate
from orchard.lab.loop import agent_retry, stop
from orchard.lab.loop.disk_limits import DiskLimit, over_cap
from orchard.lab.loop.driver import Driver
from orchard.lab.loop.isolation import Stage
from orchard.lab.records.candidate import Candidate, Flag
from orchard.lab.records.db import ExperimentRecord
from orchard.lab.records.events import ExperimentHost, LauncherFailed
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import HypothesisStatus
from orchard.lab.workers.jobs.job import JobResult

Status = ExperimentStatus


def collect(lab: Driver) -> None:
    assert lab.executor is not None
    for placement in lab.executor.placements():
        lab.state.log(ExperimentHost(placement.host, placement.address, placement.lost_on), placement.experiment)
        if placement.lost_on:
            lab.say(f"{placement.experiment}: its dask worker {placement.lost_on} was lost; "
                    f"re-queued on {placement.host} ({placement.address})")
    for result in lab.executor.poll():
        collect_result(lab, result)


def collect_result(lab: Driver, result: JobResult) -> None:
    record = lab.state.experiment(result.name)
    if result.host_failed:  # like a worker that could not be launched: back to the backlog, not KILLed
        where = result.remote.where if result.remote is not None else "its host"
        lab.failed(record, Stage.LAUNCH, OrchardError(f"on dask worker {where}: {result.reason}"))
        return
    if result.remote is not None and result.remote.over_cap is not None:  # stopped on its host, as here: KILL
        lab.failed(record, Stage.WORK, DiskLimit(f"on dask worker {result.remote.where}: {result.remote.over_cap}"))
        return
    candidate = _collected(lab, record, lambda: collect_candidate(lab.ws, lab.experiment(record), result,
                                                                  lab.launcher(record)))
    if candidate is not None:
        where = f" on {candidate.host}" if candidate.host else ""
        ended = f"exit {result.exit_code}" if result.exit_code is not None or result.reason is None else result.reason
        lab.say(f"{record.name}: worker ended{where} ({ended}); flags: {', '.join(candidate.flags) or 'none'}")


def _collected(lab: Driver, record: ExperimentRecord, read: Callable[[], Candidate]) -> Candidate | None:
    """Read the ended worker's candidate and record it; None when its agent could not work or collection failed."""
    if record.status not in (Status.STARTING, Status.RUNNING):
        return None  # its end is recorded already (its launch failed after the worker started)
    over = over_cap(lab.ws, lab.ws.worker(record.worker))  # one that grew past it between two checks
    if over is not None:
        lab.failed(record, Stage.WORK, over)
        return None
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
        lab.state.log(LauncherFailed(record.hypothesis, candidate.launcher, candidate.exit_code, reason,
                                     candidate.log_path), record.name)
        lab.state.set_counter(stop.LAUNCHER_FAILURES, lab.state.counter(stop.LAUNCHER_FAILURES) + 1)
    lab.launcher_down(lab.state.hypothesis(record.hypothesis).hypothesis.launcher)
    lab.say(f"{record.name}: {reason}; {record.hypothesis} goes back to the backlog")
    lab.render()

