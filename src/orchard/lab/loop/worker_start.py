"""Starting one experiment's worker: clean checkouts, its prompt, its job on the executor.

The experiment is recorded STARTING before its worker starts, so a crash between the two is
resumed by adopting the job, never by starting a second one (`resume.py`).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from orchard.lab.loop.driver import Driver
from orchard.lab.records.db import ExperimentRecord
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.workers.builds import baseline_binary, give_baseline
from orchard.lab.workers.executors.dask import DaskExecutor
from orchard.lab.workers.prompts import render_prompt
from orchard.lab.workers.remote import RemoteExperiment, lab_id

Status = ExperimentStatus
# Tests only: `after-launch` makes orchard SIGKILL itself between starting a worker and recording it.
KILL_AT = "ORCHARD_TEST_KILL_AT"


def start_worker(lab: Driver, record: ExperimentRecord) -> None:
    """Give the worker clean checkouts at the recorded bases, render its prompt, start it.

    The experiment is recorded STARTING before this runs: that record names the worker's job (its
    tmux window, its subprocess's mark), so an orchard killed before it records RUNNING is resumed
    by adopting the job it started, never by starting a second one.
    """
    assert lab.executor is not None
    if isinstance(lab.executor, DaskExecutor):
        _launch_remote(lab, lab.executor, record)
        return
    ws = lab.ws
    baseline = baseline_binary(ws, lab.state, record.target_base)
    launcher = lab.launcher(record)
    checkout = ws.setup_worker(record.worker, target_base=record.target_base, bench_base=record.bench_base,
                               ignore=launcher.scratch)
    give_baseline(ws, checkout.worker, baseline)  # the worker measures against its own copy
    experiment = lab.experiment(record)
    prompt = render_prompt(ws, experiment)
    ws.log_path(record.name).unlink(missing_ok=True)
    lab.executor.start(launcher.job(ws, experiment))
    if os.environ.get(KILL_AT) == "after-launch":
        os.kill(os.getpid(), signal.SIGKILL)
    with lab.state.transaction():
        lab.state.update_experiment(record.name, status=Status.RUNNING)
        lab.state.log("experiment-start", {"hypothesis": record.hypothesis, "worker": record.worker,
                                           "lane": record.lane, "base": record.target_base,
                                           "launcher": launcher.label, "title": experiment.hypothesis.title,
                                           "prompt": str(prompt),
                                           "log": str(ws.log_path(record.name))}, record.name)
    lab.say(f"{record.name}: started on worker {record.worker} ({record.lane} lane, launcher {launcher.label})")


def _launch_remote(lab: Driver, executor: DaskExecutor, record: ExperimentRecord) -> None:
    """Submit the experiment as a dask task; the dask worker makes its own checkouts and prompt."""
    assert executor.repositories is not None
    experiment = lab.experiment(record)
    hypothesis = experiment.hypothesis

    def text(path: str | None) -> str | None:
        found = None if path is None else Path(path) if Path(path).is_absolute() else lab.ws.root / path
        return found.read_text(encoding="utf-8") if found is not None and found.is_file() else None

    executor.start(RemoteExperiment(lab_id(lab.ws.root), record.name, record.worker, hypothesis,
                                    record.target_base, record.bench_base, executor.repositories,
                                    lab.ws.config, text(hypothesis.patch), text(hypothesis.bench_patch),
                                    lab_root=str(lab.ws.root)))
    lab.state.update_experiment(record.name, status=Status.RUNNING)
    lab.state.log("experiment-start", {"hypothesis": record.hypothesis, "worker": record.worker,
                                       "lane": record.lane, "base": record.target_base,
                                       "launcher": lab.launcher(record).label,
                                       "title": hypothesis.title, "executor": "dask",
                                       "scheduler": lab.ws.config.workers.scheduler,
                                       "log": str(lab.ws.log_path(record.name))}, record.name)
    lab.say(f"{record.name}: submitted to the dask cluster for worker {record.worker} ({record.lane} lane)")

