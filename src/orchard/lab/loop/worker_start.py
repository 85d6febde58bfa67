"""Starting one experiment's worker: on whichever executor the lab runs, with the journal's record of it.

The experiment is recorded STARTING before its worker starts, so a crash between the two is
resumed by adopting the job, never by starting a second one (`resume.py`).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from orchard.lab.loop.driver import Driver
from orchard.lab.records.db import ExperimentRecord
from orchard.lab.records.events import ExperimentStarted
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.workers.executors import WorkerStart
from orchard.lab.workers.worker_run.worker_setup import prepare
from orchard.lab.workers.workspace.builds import baseline_binary

Status = ExperimentStatus
# Tests only: `after-launch` makes orchard SIGKILL itself between starting a worker and recording it;
# `term-after-launch` sends SIGTERM there instead (a stop the lab records).
KILL_AT = "ORCHARD_TEST_KILL_AT"
SIGNAL_AT = {"after-launch": signal.SIGKILL, "term-after-launch": signal.SIGTERM}


def worker_start(lab: Driver, record: ExperimentRecord) -> WorkerStart:
    """The experiment's worker as an executor starts it: its job here, and how to prepare it in the workspace."""
    ws, launcher, experiment = lab.ws, lab.launcher(record), lab.experiment(record)
    job = launcher.job(ws, experiment, hand_over=False)  # its checkouts are made anew in prepare_here: then

    def prepare_here() -> Path:
        prompt = prepare(ws, experiment, launcher, baseline_binary(ws, lab.state, record.target_base))
        if job.sandbox is not None:  # the checkouts, HOME and TMPDIR made just now: the sandbox uid's, once
            job.sandbox.hand_over()
        return prompt

    return WorkerStart(experiment, job, prepare_here)


def start_worker(lab: Driver, record: ExperimentRecord) -> None:
    """Start the experiment's worker (clean checkouts at the recorded bases, its prompt, its launcher) and record it.

    The experiment is recorded STARTING before this runs: that record names the worker's job (its
    tmux window, its subprocess's mark), so an orchard killed before it records RUNNING is resumed
    by adopting the job it started, never by starting a second one.
    """
    assert lab.executor is not None
    start = worker_start(lab, record)
    started = lab.executor.start_worker(start)
    if os.environ.get(KILL_AT) in SIGNAL_AT:  # a test's stop, between the launch and RUNNING
        os.kill(os.getpid(), SIGNAL_AT[os.environ[KILL_AT]])
    launcher = lab.launcher(record)
    with lab.state.transaction():
        lab.state.update_experiment(record.name, status=Status.RUNNING)
        lab.state.log(ExperimentStarted(record.hypothesis, record.worker, record.lane, record.target_base,
                                        launcher.label, start.experiment.hypothesis.title,
                                        str(lab.ws.log_path(record.name)),
                                        prompt=str(started.prompt) if started.prompt else None,
                                        executor=lab.executor.kind, scheduler=started.submitted_to), record.name)
    where = f"submitted to {started.submitted_to} for" if started.submitted_to else "started on"
    lab.say(f"{record.name}: {where} worker {record.worker} ({record.lane} lane, launcher {launcher.label})")
