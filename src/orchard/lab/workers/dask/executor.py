"""Workers as tasks on a dask.distributed cluster: one experiment, one task.

The executor owns, for the lab's run, the read-only server of the lab's
repositories (`lab/workers/dask/serving.py`) and the cluster connection
(`lab/workers/dask/cluster.py`). `start_worker` submits `remote.run_experiment` with the
experiment's resources (`agent=1`, `cpu=N`), so dask places it on a worker
with a free slot and keeps the rest queued. `poll` returns, as every
executor does, a `JobResult` per task that ended, carrying what the run on
the dask worker adds (`RemoteRun`: its checkouts' reading, report, log,
host). A task does not outlive its cluster connection: after a restart it
is submitted again (`adopt` and `ended_earlier` find nothing).

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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Self

from orchard.errors import UsageError
from orchard.lab.config.sections import ExecutorKind
from orchard.lab.records.worker_output import RemoteRun
from orchard.lab.workers.dask.cluster import Cluster, experiment_resources
from orchard.lab.workers.dask.remote import (
    EVENT_TOPIC,
    RemoteExperiment,
    host_problem,
    lab_id,
    remove_scratch,
    run_experiment,
)
from orchard.lab.workers.dask.serving import GIT_DAEMON, RepositoryServer, ServedRepositories
from orchard.lab.workers.dask.topic import Topic
from orchard.lab.workers.executors.base import ClusterReach, Executor, Placement, Started, WorkerStart
from orchard.lab.workers.jobs.job import JobResult
from orchard.lab.workers.workspace.bench_view import holds_back
from orchard.lab.workers.workspace.workspace import Workspace

WORKER_WAIT_S = 30.0
MAX_SUBMISSIONS = 5  # a task dask gave up on is submitted again, up to this many times in all


@dataclass
class _Task:
    spec: RemoteExperiment
    future: Any
    submissions: int = 1
    address: str | None = None  # where the current attempt runs


class DaskExecutor(Executor):
    """Runs experiments on the configured dask cluster; serves the lab's repositories to it."""

    kind = ExecutorKind.DASK

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.lab = lab_id(ws.root)
        workers = ws.config.workers
        self.server = RepositoryServer(workers.serve, ws.root, ws.reference_target, ws.bench_dir, workers.serve_host)
        self.cluster = Cluster(workers)
        self.repositories: ServedRepositories | None = None
        self._tasks: dict[str, _Task] = {}
        self._starts: Topic | None = None  # where each attempt started, as the dask workers say
        self._placements: list[Placement] = []
        self._cancelled: list[JobResult] = []

    # -- lifecycle ---------------------------------------------------------------

    def __enter__(self) -> Self:
        try:
            self._check_served_holdout()
            self.repositories = self.server.start()
            self.cluster.open()
            self._starts = Topic(self.cluster.client, EVENT_TOPIC)  # a reused cluster's old runs are not in it
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

    def _check_served_holdout(self) -> None:
        """The git daemon serves the whole bench, held-out inputs included (a worker's own copy has them removed,
        and the judge hosts need them): a worker with the host's whole network could fetch them from it."""
        if self.ws.config.workers.serve != GIT_DAEMON:
            return
        open_to = self.ws.config.on_whole_network()
        if open_to and holds_back(self.ws):
            raise UsageError(f"{', '.join(open_to)}: network = \"all\" on a dask lab whose suite holds inputs out: "
                             "its workers could fetch them from the lab's git daemon, which serves the whole bench; "
                             "give it network = \"api\" (with a base_url) or \"none\", or serve = \"path\"")

    def _check_hosts(self) -> None:
        """Every dask worker can fetch the served repositories and sandbox its launcher (UsageError naming each
        that cannot): on a host that cannot, every experiment would fail the same way."""
        found = self.cluster.client.run(host_problem, self.repositories, self.ws.config.workers)
        problems = [f"dask worker {address}: {problem}" for address, problem in sorted(found.items()) if problem]
        if problems:
            raise UsageError("; ".join(problems))

    def close(self) -> None:
        """Cancel what still runs, remove the lab's scratch copies on every worker, disconnect, stop serving."""
        client = self.cluster.client
        if client is not None:
            if self._starts is not None:
                self._starts.close()
                self._starts = None
            for task in self._tasks.values():
                task.future.cancel()
            self._tasks.clear()
            try:
                client.run(remove_scratch, self.lab)
            except OSError:
                pass  # a worker that is gone has nothing left to remove
        self.cluster.close()
        self.server.stop()

    # -- the executor contract -------------------------------------------------------

    def running(self) -> list[str]:
        return list(self._tasks)

    def start_worker(self, start: WorkerStart) -> Started:
        """Submit the experiment as a dask task; the dask worker makes its own checkouts and prompt."""
        assert self.repositories is not None, "the executor is not open"
        experiment = start.experiment
        if experiment.name in self._tasks:
            raise UsageError(f"experiment {experiment.name!r} is already running")
        hypothesis = experiment.hypothesis
        spec = RemoteExperiment(lab_id(self.ws.root), experiment.name, experiment.checkout.worker.name, hypothesis,
                                experiment.checkout.target_base, experiment.checkout.bench_base, self.repositories,
                                self.ws.config, self._text(hypothesis.patch), self._text(hypothesis.bench_patch),
                                lab_root=str(self.ws.root))
        self._tasks[spec.name] = _Task(spec, self._submit(spec))
        return Started(submitted_to=self.ws.config.workers.scheduler)

    def _text(self, path: str | None) -> str | None:
        """A ready patch of the hypothesis, as text: the dask worker cannot read the lab's files."""
        found = None if path is None else Path(path) if Path(path).is_absolute() else self.ws.root / path
        return found.read_text(encoding="utf-8") if found is not None and found.is_file() else None

    def _submit(self, spec: RemoteExperiment) -> Any:
        # a fresh key per submission: dask must not answer a re-submission from a cached failure
        return self.cluster.client.submit(run_experiment, spec, key=f"orchard-{spec.name}-{uuid.uuid4().hex[:8]}",
                                          resources=experiment_resources(self.ws.config.workers), pure=False)

    def cancel(self, name: str, reason: str = "cancelled") -> None:
        """Forget the task (a launcher already running on its host runs on to its own timeout, unread)."""
        task = self._tasks.pop(name, None)
        if task is None:
            raise UsageError(f"experiment {name!r} is not running")
        task.future.cancel()
        self._cancelled.append(replace(self._ended(task, reason), cancelled=True))

    def poll(self) -> list[JobResult]:
        """The experiments that ended since the last call, with what their dask workers sent back."""
        from distributed import KilledWorker

        self._read_events()
        ended, self._cancelled = self._cancelled, []
        done = {name: task for name, task in self._tasks.items() if task.future.done()}
        sent = self._gather(done)
        for name, task in done.items():
            try:
                result: JobResult = sent[name] if name in sent else task.future.result()
                ended.append(replace(result, log_path=self.ws.log_path(name)))  # where the lab keeps its copy
            except KilledWorker:
                if task.submissions < MAX_SUBMISSIONS:
                    task.submissions += 1
                    task.future = self._submit(task.spec)
                    continue
                ended.append(self._ended(task, f"dask lost {task.submissions} workers running it", host_failed=True))
            except Exception as error:  # noqa: BLE001 - the task's own failure ends the experiment, not the lab
                ended.append(self._ended(task, f"the dask task failed: {type(error).__name__}: {error}"))
            del self._tasks[name]
        return ended

    def _ended(self, task: _Task, error: str, host_failed: bool = False) -> JobResult:
        """A task that sent nothing back: why, and where it last ran."""
        return JobResult(task.spec.name, None, None, False, False, "", 0.0, self.ws.log_path(task.spec.name),
                         reason=error, remote=RemoteRun("", task.address or "", host_failed=host_failed))

    def _gather(self, done: dict[str, _Task]) -> dict[str, JobResult]:
        """What the tasks that finished sent back, fetched in one call: one round trip per task, each waiting on
        the client's event loop, was most of the loop's time at 128 workers. A task that failed, or whose result
        cannot be fetched now, is left to its own `result()` (and so to the handling of its error)."""
        finished = {name: task for name, task in done.items() if task.future.status == "finished"}
        if not finished:
            return {}
        try:
            results = self.cluster.client.gather([task.future for task in finished.values()])
        except Exception:  # noqa: BLE001 - each task's own result() raises its own error
            return {}
        return dict(zip(finished, results, strict=True))

    def _read_events(self) -> None:
        assert self._starts is not None, "the executor is not open"
        for message in self._starts.take():
            task = self._tasks.get(message.get("experiment", ""))
            if task is None:
                continue
            lost_on = task.address
            task.address = message["address"]
            self._placements.append(Placement(task.spec.name, message["host"], message["address"], lost_on))

    def cluster_reach(self) -> ClusterReach | None:
        assert self.repositories is not None
        return ClusterReach(self.cluster.client, self.lab, self.repositories)

    def placements(self) -> list[Placement]:
        """Attempts that started since the last call (a re-queue names the worker it was lost on)."""
        found, self._placements = self._placements, []
        return found
