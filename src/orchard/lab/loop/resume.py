"""Resuming after a crash: the workers an earlier orchard left running.

Each is adopted again (its job still runs), collected (it ended unseen), or started again
from clean (it died with that orchard, or the lab itself stopped it); a run that ends early
records which workers it stopped, so the next run knows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from orchard.lab.loop import collection
from orchard.lab.loop.driver import Driver
from orchard.lab.records.db import ExperimentRecord
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.workers.executors.dask import DaskExecutor

Status = ExperimentStatus
STOPPED_BY_LAB = "worker-stopped-by-lab"  # the journal's record that a worker was killed by the lab's own stop


def _stopped_by_lab(lab: Driver, record: ExperimentRecord) -> bool:
    """Whether the lab itself stopped this experiment's worker after it last started (never a finished one)."""
    kinds = [e.kind for e in lab.state.events() if e.experiment == record.name
             and e.kind in ("experiment-start", STOPPED_BY_LAB)]
    return bool(kinds) and kinds[-1] == STOPPED_BY_LAB


@contextlib.contextmanager
def stopping(lab: Driver) -> Iterator[None]:
    """A run that ends early records, before the executor kills them, that its running workers were stopped."""
    try:
        yield
    except BaseException as error:
        for record in lab.state.experiments(Status.RUNNING):
            lab.state.log(STOPPED_BY_LAB, {"why": f"orchard run stopped ({type(error).__name__})",
                                           "worker": record.worker}, record.name)
        raise


def resume_workers(lab: Driver) -> None:
    """Experiments an earlier orchard left running: adopt, collect, or start again."""
    assert lab.executor is not None
    for record in lab.state.experiments(Status.STARTING, Status.RUNNING):
        if record.status == Status.RUNNING and _stopped_by_lab(lab, record):
            lab.say(f"{record.name}: the lab stopped its worker last time; starting it again from clean")
            lab.launch(record)
            continue
        if isinstance(lab.executor, DaskExecutor):
            # its task went with the previous orchard's cluster connection: submit it again
            lab.say(f"{record.name}: submitted again (the previous orchard's dask task is gone)")
            lab.launch(record)
            continue
        job = lab.launcher(record).job(lab.ws, lab.experiment(record))
        # a STARTING one too: the previous orchard may have died right after launching it
        if lab.executor.adopt(job):
            lab.state.update_experiment(record.name, status=Status.RUNNING)
            lab.say(f"{record.name}: still running ({lab.executor.kind}); watching it again")
            continue
        ended = lab.executor.ended_earlier(job)  # its log is new with each launch: this launch's end
        if ended is not None:
            collection.collect_result(lab, ended)
        elif record.status == Status.STARTING:
            lab.launch(record)
        else:
            lab.say(f"{record.name}: its worker died with the previous orchard; starting it again")
            lab.launch(record)

