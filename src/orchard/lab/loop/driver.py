"""What the loop's steps ask of the `Lab` that runs them: a typed seat, so no step imports the loop.

Collecting an ended worker (`collection.py`), resuming after a crash
(`resume.py`) and starting a worker (`worker_start.py`) each run on the
loop's thread for one experiment. They read the lab's workspace, lab.db
connection and executor, ask it for an experiment's launcher, and hand back
what only the loop decides: an experiment that failed, a worker to launch,
a launcher whose agent could not work or must wait. None of them writes the lab's fields.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from orchard.lab.db.state import LabState
from orchard.lab.loop.isolation import Stage
from orchard.lab.records.db import ExperimentRecord
from orchard.lab.records.experiment import Experiment
from orchard.lab.workers.executors import Executor
from orchard.lab.workers.launchers.launcher_base import Launcher
from orchard.lab.workers.workspace.workspace import Workspace


class Driver(Protocol):
    @property
    def ws(self) -> Workspace: ...
    @property
    def state(self) -> LabState: ...
    @property
    def say(self) -> Callable[[str], None]: ...
    @property
    def executor(self) -> Executor | None: ...
    @property
    def deferred(self) -> set[str]:
        """Hypotheses back in the backlog that this run does not take again."""

    def experiment(self, record: ExperimentRecord) -> Experiment:
        """The experiment a record names, with its worker's checkout at the recorded bases."""

    def launcher(self, record: ExperimentRecord) -> Launcher:
        """The launcher the experiment's hypothesis names."""

    def launch(self, record: ExperimentRecord) -> None:
        """Start the experiment's worker (again); a failure re-queues its hypothesis."""

    def failed(self, record: ExperimentRecord, stage: Stage, error: BaseException) -> None:
        """One experiment failed at `stage`: record why and go on (unless the lab itself failed)."""

    def launcher_down(self, launcher: str) -> None:
        """`launcher`'s agent could not work at all: give it no more work in this run."""

    def launcher_wait(self, launcher: str, in_a_row: int) -> float:
        """`launcher`'s agent failed for a passing reason, the `in_a_row`-th time: hold its work back a while;
        returns the wait in seconds (agent_retry.py)."""

    def render(self) -> None:
        """Write the notebook again."""
