"""Steering a lab while it runs: `orchard stop LAB EXPERIMENT`, `orchard pause LAB`, `orchard resume LAB`.

The commands only journal what a person asked, with who asked, in lab.db (a lab may run in another process,
or none); the loop (`Steering`) carries it out at its next pass, and a lab started again honours what is
still asked:

- a stop: the experiment's worker is cancelled and never judged (its checkouts removed), its hypothesis back
  in the backlog (not taken again in this run) or KILLed, as asked. A worker that ended before the loop saw
  the request is collected and judged as usual.
- a pause: no new worker starts and no stop condition is read (a budget spent while paused does not end the
  lab); the running workers finish and are judged and landed. The pause is in lab.db: `orchard run` on a
  paused lab adopts its workers and waits for `orchard resume`.
- a resume: new workers start again, under orchard.toml's `[stop]` read again, so limits raised while paused
  (`--max-cost-usd N` and the other flags write them into orchard.toml, or edit it by hand) apply at once.
  `orchard run LAB --max-cost-usd N` (or `--max-wall-minutes N`) is the same resume, then the run.
- a budget used past `[stop] hard_cap_factor` times its limit: the running workers are stopped as if a person
  asked (never judged, their hypotheses back in the backlog, no attempt counted); the budget's pause says so.

Each pass also adds the time since the last one to the lab's running time (db/running_time.py), unless the
lab sat paused with nothing at work: a lab paused overnight spends none of its wall-time budget.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping

from orchard.errors import UsageError
from orchard.lab.config.orchard_toml import load
from orchard.lab.config.stop_limits import set_limits
from orchard.lab.db import workspace_lock
from orchard.lab.db.paused import paused
from orchard.lab.db.running_time import RunClock
from orchard.lab.db.state import LabState
from orchard.lab.loop.driver import Driver
from orchard.lab.loop.isolation import records_full
from orchard.lab.loop.stop import HARD_CAP, budget_use, past_hard_cap
from orchard.lab.notebook.spending import cost_text
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import HypothesisStatus
from orchard.lab.records.judgment import Decision
from orchard.lab.records.steering_events import ExperimentStopped, Paused, Resumed, StopAsked
from orchard.lab.text import visible
from orchard.lab.workers.workspace.workspace import Workspace

AT_WORK = (ExperimentStatus.STARTING, ExperimentStatus.RUNNING)


def _whether_running(ws: Workspace) -> str:
    pid = workspace_lock.holder(ws.root)
    return f"the lab running on it (pid {pid}) does so at its next pass" if pid else \
        f"no lab runs on it now: the next `orchard run {ws.root}` does"


def ask_stop(ws: Workspace, state: LabState, experiment: str, *, requeue: bool, by: str) -> str:
    """Journal a request to stop one experiment's worker; what will happen, in one line."""
    try:
        record = state.experiment(experiment)
    except KeyError:
        raise UsageError(f"{experiment}: no such experiment in {ws.root} (`orchard status {ws.root}` lists "
                         "them)") from None
    if record.status not in AT_WORK:
        raise UsageError(f"{experiment} has no worker at work to stop (it is {record.status}); only a starting or "
                         "running experiment can be stopped")
    state.log(StopAsked(requeue, by), experiment)
    where = "back to the backlog" if requeue else "KILLed"
    return f"{experiment}: stop asked by {by}, its hypothesis {record.hypothesis} {where}; {_whether_running(ws)}"


def pause(ws: Workspace, state: LabState, by: str) -> str:
    """Journal a pause (once); what it means, in one line."""
    now = paused(state)
    if now is not None:
        return f"{ws.root}: already paused by {visible(now.event.by)}; `orchard resume {ws.root}` goes on"
    state.log(Paused(by))
    running = len(state.experiments(*AT_WORK))
    return (f"{ws.root}: paused by {by}: no new workers ({running} at work finish and are judged); "
            f"{_whether_running(ws)}; `orchard resume {ws.root}` goes on")


def resume(ws: Workspace, state: LabState, by: str, limits: Mapping[str, float]) -> str:
    """Write the limits asked for into orchard.toml and journal the resume; what changed, in one line."""
    if paused(state) is None and not limits:
        raise UsageError(f"{ws.root} is not paused: nothing to resume (a limit changes with a flag, e.g. "
                         f"`orchard resume {ws.root} --max-cost-usd 20`)")
    return f"{raise_limits(ws, state, by, limits)}; {_whether_running(ws)}"


def raise_limits(ws: Workspace, state: LabState, by: str, limits: Mapping[str, float]) -> str:
    """The limits written into orchard.toml and a resume journalled (`orchard resume`, and `orchard run` given a
    budget): what changed, and what is spent so far, which a resumed lab keeps."""
    changed = set_limits(ws.config_path, limits) if limits else ()
    state.log(Resumed(by, changed))
    said = "; ".join(c.describe() for c in changed) or "limits as orchard.toml has them"
    used = budget_use(state)
    kept = f"; spent so far, kept: {cost_text(used.cost_usd, used.estimated)}" if used.cost_usd else ""
    return f"{ws.root}: resumed by {by} ({said}){kept}"


class Steering:
    """The loop's side: stops carried out, a pause honoured (said once), a resume's `[stop]` read again."""

    def __init__(self, state: LabState, clock: RunClock) -> None:
        resumes = state.events_of(Resumed)
        self.resumed = resumes[-1].id if resumes else 0  # orchard.toml was read at this run's start
        self.said = 0  # the pause this run said it honours
        self.clock = clock  # this run's share of the lab's running time
        self.idle = False  # at the last pass: paused, nothing at work (the time since then is not counted)

    def steer(self, lab: Driver) -> bool:
        """Act on what was asked since the last pass, and on a budget past its hard cap (even while paused: it is
        money); True while the lab is paused."""
        try:
            self.clock.check(lab.state, counting=not self.idle)
        except Exception as error:  # a worker filled the disk: the disk check frees it, the time is kept till then
            if not records_full(lab.ws.root, error):
                raise
        for asked in lab.state.events_of(StopAsked):
            if asked.experiment and lab.state.experiment(asked.experiment).status in AT_WORK:
                _stop(lab, asked.experiment, asked.event)
        at_work = lab.state.experiments(*AT_WORK)
        capped = past_hard_cap(lab.ws, lab.state) if at_work else None
        for record in at_work if capped else ():
            _stop(lab, record.name, StopAsked(requeue=True, by=f"{HARD_CAP} ({capped})"))
        resumes = lab.state.events_of(Resumed)
        if resumes and resumes[-1].id > self.resumed:
            self.resumed = resumes[-1].id
            _read_limits(lab, resumes[-1].event)
        pause = paused(lab.state)
        if pause is not None and pause.id != self.said:
            self.said = pause.id
            lab.say(f"paused by {visible(pause.event.by)}: no new workers until `orchard resume {lab.ws.root}`")
        self.idle = pause is not None and not lab.state.experiments(*ExperimentStatus.active())
        return pause is not None


def _stop(lab: Driver, name: str, asked: StopAsked) -> None:
    record = lab.state.experiment(name)
    if lab.executor is not None and name in lab.executor.running():
        lab.executor.cancel(name, f"stopped by {asked.by}")
    lab.ws.remove_worker(record.worker)
    reason = f"stopped by {visible(asked.by)}: never judged; its hypothesis " + (
        "went back to the backlog" if asked.requeue else "was KILLed")
    with lab.state.transaction():
        lab.state.update_experiment(name, status=ExperimentStatus.DONE, finished_at=time.time(),
                                    decision=None if asked.requeue else Decision.KILL, reasons=[reason])
        lab.state.update_hypothesis(record.hypothesis, status=HypothesisStatus.OPEN if asked.requeue
                                    else HypothesisStatus.KILLED)
        lab.state.log(ExperimentStopped(record.hypothesis, asked.requeue, asked.by), name)
    if asked.requeue:
        lab.deferred.add(record.hypothesis)  # not taken again in this run: a person just stopped it
    lab.say(f"{name}: {reason}")
    lab.render()


def _read_limits(lab: Driver, resumed: Resumed) -> None:
    """orchard.toml's `[stop]` as it is now; the limits in force stay when it no longer loads."""
    try:
        stop = load(lab.ws.config_path).stop
    except UsageError as error:
        lab.say(f"resumed by {visible(resumed.by)}, but orchard.toml does not load ({error}): the limits stay as "
                "they were")
        return
    lab.ws.config = dataclasses.replace(lab.ws.config, stop=stop)
    lab.say(f"resumed by {visible(resumed.by)}: " + ("; ".join(c.describe() for c in resumed.limits)
                                                     or "new workers start again"))
