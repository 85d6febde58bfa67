"""Workers as tasks on a dask.distributed cluster: one experiment, one task.

The executor owns, for the lab's run, the read-only server of the lab's
repositories (`lab/workers/serving.py`) and the cluster connection
(`lab/workers/cluster.py`). `start` submits `remote.run_experiment` with the
experiment's resources (`agent=1`, `cpu=N`), so dask places it on a worker
with a free slot and keeps the rest queued. `poll` returns the outcomes of
tasks that ended.

A dask worker lost mid-experiment is dask's business first: its scheduler
gives the task to another worker. Each attempt writes where it started into
dask's event log, so a second start of the same experiment is a re-queue,
reported by `placements` with the host it was lost on. If dask gives up
(its `allowed-failures`), the experiment is submitted again: a lost
machine never kills a hypothesis.

At the start every dask worker checks that it can fetch the served
repositories and make the configured sandbox (`remote.host_problem`): a
host that cannot would fail every experiment, so the lab refuses to start
and names it. Workers that join later are not checked.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from orchard.errors import UsageError
from orchard.lab.workers.cluster import Cluster, experiment_resources
from orchard.lab.workers.remote import (
    EVENT_TOPIC,
    RemoteExperiment,
    RemoteOutcome,
    host_problem,
    lab_id,
    remove_scratch,
    run_experiment,
)
from orchard.lab.workers.serving import RepositoryServer, ServedRepositories
from orchard.lab.workers.workspace import Workspace

WORKER_WAIT_S = 30.0
MAX_SUBMISSIONS = 5  # a task dask gave up on is submitted again, up to this many times in all


@dataclass(frozen=True)
class Placement:
    """Where an attempt of an experiment started; `lost_on` is the worker a re-queue came from."""

    experiment: str
    host: str
    address: str
    lost_on: str | None = None


@dataclass
class _Task:
    spec: RemoteExperiment
    future: Any
    submissions: int = 1
    address: str | None = None  # where the current attempt runs


class DaskExecutor:
    """Runs experiments on the configured dask cluster; serves the lab's repositories to it."""

    kind = "dask"

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.lab = lab_id(ws.root)
        workers = ws.config.workers
        self.server = RepositoryServer(workers.serve, ws.root, ws.reference_target, ws.bench_dir, workers.serve_host)
        self.cluster = Cluster(workers)
        self.repositories: ServedRepositories | None = None
        self._tasks: dict[str, _Task] = {}
        self._events_seen = 0
        self._placements: list[Placement] = []

    # -- lifecycle ---------------------------------------------------------------

    def __enter__(self) -> Self:
        try:
            self.repositories = self.server.start()
            self.cluster.open()
            self._events_seen = len(self.cluster.client.get_events(EVENT_TOPIC))  # a reused cluster's old runs
            deadline = time.monotonic() + WORKER_WAIT_S  # workers may still be joining
            while self.cluster.agent_slots() == 0 and time.monotonic() < deadline:
                time.sleep(0.2)
            if self.cluster.agent_slots() == 0:
                raise UsageError(f"the dask cluster at {self.ws.config.workers.scheduler} has had no worker with an "
                                 f"`agent` resource for {WORKER_WAIT_S:g} s: start workers with "
                                 "`dask worker ADDRESS --resources "
                                 "\"agent=1 cpu=4\"`")
            self._check_hosts()
        except BaseException:
            self.close()
            raise
        return self

    def _check_hosts(self) -> None:
        """Every dask worker can fetch the served repositories and sandbox its launcher (UsageError naming each
        that cannot): on a host that cannot, every experiment would fail the same way."""
        found = self.cluster.client.run(host_problem, self.repositories, self.ws.config.workers)
        problems = [f"dask worker {address}: {problem}" for address, problem in sorted(found.items()) if problem]
        if problems:
            raise UsageError("; ".join(problems))

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Cancel what still runs, remove the lab's scratch copies on every worker, disconnect, stop serving."""
        client = self.cluster.client
        if client is not None:
            for task in self._tasks.values():
                task.future.cancel()
            self._tasks.clear()
            try:
                client.run(remove_scratch, self.lab)
            except OSError:
                pass  # a worker that is gone has nothing left to remove
        self.cluster.close()
        self.server.stop()

    # -- the contract the loop uses --------------------------------------------------

    def attach_command(self) -> str | None:
        return None

    def running(self) -> list[str]:
        return list(self._tasks)

    def start(self, spec: RemoteExperiment) -> None:
        if spec.name in self._tasks:
            raise UsageError(f"experiment {spec.name!r} is already running")
        self._tasks[spec.name] = _Task(spec, self._submit(spec))

    def _submit(self, spec: RemoteExperiment) -> Any:
        # a fresh key per submission: dask must not answer a re-submission from a cached failure
        return self.cluster.client.submit(run_experiment, spec, key=f"orchard-{spec.name}-{uuid.uuid4().hex[:8]}",
                                          resources=experiment_resources(self.ws.config.workers), pure=False)

    def poll(self) -> list[RemoteOutcome]:
        """The outcomes of experiments that ended since the last call."""
        from distributed import KilledWorker

        self._read_events()
        ended: list[RemoteOutcome] = []
        for name, task in list(self._tasks.items()):
            if not task.future.done():
                continue
            try:
                ended.append(task.future.result())
            except KilledWorker:
                if task.submissions < MAX_SUBMISSIONS:
                    task.submissions += 1
                    task.future = self._submit(task.spec)
                    continue
                ended.append(self._failed(task, f"dask lost {task.submissions} workers running it", host_failed=True))
            except Exception as error:  # noqa: BLE001 - the task's own failure ends the experiment, not the lab
                ended.append(self._failed(task, f"the dask task failed: {type(error).__name__}: {error}"))
            del self._tasks[name]
        return ended

    def _failed(self, task: _Task, error: str, host_failed: bool = False) -> RemoteOutcome:
        return RemoteOutcome(task.spec.name, "", task.address or "", None, None, False, "", 0.0, 0.0, error=error,
                             host_failed=host_failed)

    def _read_events(self) -> None:
        events = self.cluster.client.get_events(EVENT_TOPIC)
        for _stamp, message in events[self._events_seen:]:
            task = self._tasks.get(message.get("experiment", ""))
            if task is None:
                continue
            lost_on = task.address
            task.address = message["address"]
            self._placements.append(Placement(task.spec.name, message["host"], message["address"], lost_on))
        self._events_seen = len(events)

    def placements(self) -> list[Placement]:
        """Attempts that started since the last call (a re-queue names the worker it was lost on)."""
        found, self._placements = self._placements, []
        return found
