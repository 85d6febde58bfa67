"""The executor contract: what the loop asks of wherever its workers run.

Every executor starts an experiment's worker (`start_worker`), reports how
each one ended (`poll`: a `JobResult`), cancels one, and may find workers
an earlier orchard left (`adopt`, `ended_earlier`). Executors that run
workers on this machine (`process.ProcessExecutor`: tmux windows, plain
subprocesses) prepare the worker in the lab's workspace and run its job
there; the dask executor sends the experiment to a dask worker, whose host
prepares it the same way (`worker_setup.prepare`) and reads its checkouts
with the same reader, and its `JobResult` carries what that run adds
(`worker_output.RemoteRun`). The loop never asks which kind it has.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from orchard.lab.config.sections import ExecutorKind
from orchard.lab.records.experiment import Experiment
from orchard.lab.workers.jobs.job import Job, JobResult


@dataclass(frozen=True)
class WorkerStart:
    """One experiment's worker, as the loop hands it to an executor to start (or to find again after a restart).

    `job` is its launch line on this machine; `prepare` makes its clean
    checkouts, baseline copy and prompt in the lab's workspace and returns
    the prompt's path. An executor that runs workers elsewhere uses neither:
    its hosts prepare their own.
    """

    experiment: Experiment
    job: Job
    prepare: Callable[[], Path]


@dataclass(frozen=True)
class Started:
    """How a worker was started, as the journal's experiment-start records it."""

    prompt: Path | None = None  # rendered on the lab's host; None: on the worker's
    submitted_to: str | None = None  # the dask scheduler it was submitted to; None: it runs here


@dataclass(frozen=True)
class Placement:
    """Where an attempt of an experiment started; `lost_on` is the worker a re-queue came from."""

    experiment: str
    host: str
    address: str
    lost_on: str | None = None


@dataclass(frozen=True)
class ClusterReach:
    """What the lab's judge hosts are opened with, from an executor on a dask cluster: its client, the lab's id
    and where the lab's repositories are served (`dask.serving.ServedRepositories`, above this module)."""

    client: Any
    lab: str
    repositories: Any


class Executor(ABC):
    """Starts the lab's workers, enforces their timeouts, reports how each one ended."""

    kind: ExecutorKind

    @abstractmethod
    def start_worker(self, start: WorkerStart) -> Started:
        """Start the experiment's worker; its name must not be running already."""

    @abstractmethod
    def poll(self) -> list[JobResult]:
        """The workers that ended since the last call."""

    @abstractmethod
    def running(self) -> list[str]:
        """The experiments whose workers run."""

    @abstractmethod
    def cancel(self, name: str, reason: str = "cancelled") -> None:
        """End a running worker; its result arrives through `poll`."""

    @abstractmethod
    def close(self) -> None:
        """Stop every running worker and whatever the executor started."""

    def adopt(self, start: WorkerStart) -> bool:
        """Watch again a worker an earlier orchard started, if it still runs (here: none outlives its orchard)."""
        return False

    def ended_earlier(self, start: WorkerStart) -> JobResult | None:
        """How a worker an earlier orchard started ended while nobody watched (None: unknown, start it again)."""
        return None

    def placements(self) -> list[Placement]:
        """Where attempts started since the last call, when the executor places workers on other hosts."""
        return []

    def cluster_reach(self) -> ClusterReach | None:
        """The dask cluster its workers run on, for the lab's judge hosts (None: no cluster, no judge hosts)."""
        return None

    def attach_command(self) -> str | None:
        """The command a user runs to watch the workers live (None: nothing to attach to)."""
        return None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
