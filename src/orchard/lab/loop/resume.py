"""Resuming after a crash: the workers an earlier orchard left running.

Each is adopted again (its job still runs), collected (it ended unseen), or started again
from clean (it died with that orchard, or the lab itself stopped it); a run that ends early
records which workers it stopped, so the next run knows.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator

from orchard.lab.loop import collection
from orchard.lab.loop.driver import Driver
from orchard.lab.loop.worker_start import worker_start
from orchard.lab.records.db import ExperimentRecord
from orchard.lab.records.events import EventKind, WorkerStopped
from orchard.lab.records.experiment import ExperimentStatus

Status = ExperimentStatus


def _stopped_by_lab(lab: Driver, record: ExperimentRecord) -> bool:
    """Whether the lab itself stopped this experiment's worker after it last started (never a finished one)."""
    kinds = [e.kind for e in lab.state.events() if e.experiment == record.name
             and e.kind in (EventKind.EXPERIMENT_START, EventKind.WORKER_STOPPED)]
    return bool(kinds) and kinds[-1] == EventKind.WORKER_STOPPED


@contextlib.contextmanager
def stopping(lab: Driver) -> Iterator[None]:
    """A run that ends early records, before the executor kills them, that its workers were stopped: a STARTING
    one too (stopped between its launch and RUNNING, its killed worker's end would be collected on resume)."""
    try:
        yield
    except BaseException as error:
        with contextlib.suppress(sqlite3.Error):  # a full or locked lab.db: resume restarts them from clean
            for record in lab.state.experiments(Status.STARTING, Status.RUNNING):
                lab.state.log(WorkerStopped(f"orchard run stopped ({type(error).__name__})", record.worker),
                              record.name)
        raise


def resume_workers(lab: Driver) -> None:
    """Experiments an earlier orchard left running: adopt, collect, or start again."""
    assert lab.executor is not None
    for record in lab.state.experiments(Status.STARTING, Status.RUNNING):
        if _stopped_by_lab(lab, record):
            lab.say(f"{record.name}: the lab stopped its worker last time; starting it again from clean")
            lab.launch(record)
            continue
        start = worker_start(lab, record)
        # a STARTING one too: the previous orchard may have died right after launching it
        if lab.executor.adopt(start):
            lab.state.update_experiment(record.name, status=Status.RUNNING)
            lab.say(f"{record.name}: still running ({lab.executor.kind}); watching it again")
            continue
        ended = lab.executor.ended_earlier(start)  # its log is new with each launch: this launch's end
        if ended is not None:
            collection.collect_result(lab, ended)
        elif record.status == Status.STARTING:
            lab.launch(record)
        else:
            lab.say(f"{record.name}: its worker did not outlive the previous orchard ({lab.executor.kind}); "
                    "starting it again")
            lab.launch(record)

