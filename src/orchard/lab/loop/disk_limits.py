"""Disk a worker may take: its checkout's cap, and what a full disk costs (one experiment, never the lab).

A worker writes where the lab keeps its records: a checkout that grows
without bound fills the file system under lab.db, the logs and the judge's
checkouts. Two rules, checked every few seconds while workers run and once
before a resumed lab writes anything:

- a worker whose directory (both checkouts, its HOME and TMPDIR; each file
  counted once, however many links it has) holds more than `[workers]
  max_checkout_mb` is stopped and its experiment KILLed with that reason;
- when the workspace's file system has less than `MIN_FREE_MB` left, the
  running experiment whose worker holds the most is stopped and KILLed
  (the disk is full), so the lab can record it and go on.

Either way its checkouts are removed before anything is recorded (`Lab.failed`, loop/lab.py).
Dask workers' checkouts are on their own hosts: each host checks the cap of the worker it runs
(`workers/dask/remote.py`), and its reason comes back to be KILLed here alike (`collection.py`).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from orchard.errors import OrchardError
from orchard.lab.loop.driver import Driver
from orchard.lab.loop.isolation import Stage
from orchard.lab.loop.worker_start import worker_start
from orchard.lab.records.db import ExperimentRecord
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.worker import WorkerDir
from orchard.lab.workers.executors import Executor
from orchard.lab.workers.workspace import checkout_size
from orchard.lab.workers.workspace.checkout_size import CHECK_EVERY_S, MB, used_mb
from orchard.lab.workers.workspace.workspace import Workspace

MIN_FREE_MB = 16  # below this the lab cannot be sure to record a judgment, a log line or a build


class DiskLimit(OrchardError):
    """A worker over its checkout cap, or the one holding the most of a full disk."""


def free_mb(path: Path) -> float:
    return shutil.disk_usage(path).free / MB


def over_cap(ws: Workspace, worker: WorkerDir) -> DiskLimit | None:
    """The worker's directory over `[workers] max_checkout_mb`, said as its experiment's reason; None within."""
    reason = checkout_size.over_cap(worker.root, ws.config.workers.max_checkout_mb)
    return None if reason is None else DiskLimit(reason)


class DiskLimits:
    """The loop's check of its running workers' disk, at most every `CHECK_EVERY_S` (at once when `now`)."""

    def __init__(self) -> None:
        self._last = float("-inf")

    def check(self, lab: Driver, *, now: bool = False) -> None:
        if not isinstance(lab.executor, Executor):
            return
        if not now and time.monotonic() - self._last < CHECK_EVERY_S:
            return
        self._last = time.monotonic()
        left = []
        for record in lab.state.experiments(ExperimentStatus.STARTING, ExperimentStatus.RUNNING):
            error = over_cap(lab.ws, lab.ws.worker(record.worker))
            if error is not None:
                self._stop(lab, record, error)
            else:
                left.append(record)
        free = free_mb(lab.ws.root)
        if left and free < MIN_FREE_MB:
            sizes = {record.name: used_mb(lab.ws.worker(record.worker).root) for record in left}
            largest = max(left, key=lambda record: sizes[record.name])
            self._stop(lab, largest, DiskLimit(f"the disk is full ({free:,.1f} MB left in {lab.ws.root}); its "
                                               f"worker holds {sizes[largest.name]:,.0f} MB, the most of any "
                                               "running worker"))

    @staticmethod
    def _stop(lab: Driver, record: ExperimentRecord, error: DiskLimit) -> None:
        assert isinstance(lab.executor, Executor)
        if record.name not in lab.executor.running():  # a resumed lab: its worker may still run, unwatched
            lab.executor.adopt(worker_start(lab, record))
        lab.failed(record, Stage.WORK, error)
