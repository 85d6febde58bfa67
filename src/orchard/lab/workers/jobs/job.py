"""A worker's job: one launch line to run (`Job`) and how it ended (`JobResult`), whichever executor ran it.

Below the executors, so the launchers that make jobs and the dask task that
reports a result need none of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from orchard.lab.records.worker_output import RemoteRun
from orchard.lab.workers.sandbox.sandbox import Confinement


@dataclass(frozen=True)
class Job:
    """One worker run: a shell launch line, where it runs, where its output goes."""

    name: str  # the experiment: window name and log name
    command: str  # bash command line
    cwd: Path
    log_path: Path
    timeout_s: float | None = None
    env: Mapping[str, str] = field(default_factory=dict)  # exported by the wrapper (and passed into a sandbox)
    sandbox: Confinement | None = None  # None: the launch line runs as the wrapper does


@dataclass(frozen=True)
class JobResult:
    """How a job ended. `exit_code` None: killed by `signal` before it could exit."""

    name: str
    exit_code: int | None
    signal: int | None
    timed_out: bool
    cancelled: bool
    started_at: str
    duration_s: float
    log_path: Path
    reason: str | None = None  # why orchard ended it, or what went wrong around it
    remote: RemoteRun | None = None  # what a run on a dask worker sent back; None: it ran on this machine

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.cancelled

    @property
    def host_failed(self) -> bool:
        """Its host failed around it (setup, or every dask worker lost): not its hypothesis's failure."""
        return self.remote is not None and self.remote.host_failed
