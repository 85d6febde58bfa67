"""One experiment's failure ends that experiment, never the lab.

A worker controls what it leaves behind: it can delete its checkout or its
`.git`, fill its disk, write a patch or a file list too large for lab.db.
Whatever goes wrong while launching, collecting, judging or recording ONE
experiment is caught by the loop, recorded with its reason (an
`experiment-error` journal entry and the experiment's reasons) and the lab
goes on with the others; a resume finds the experiment done and never meets
the failure again.

- `launch`: the worker never ran, so the hypothesis is not at fault: it goes
  back to the backlog (re-queued), skipped for the rest of this run.
- `work` (stopped over a limit while it ran), `collect`, `judge`, `record`:
  the candidate cannot be judged: KILL, with the error as the reason. Until
  the worker is done with (launch, work, collect), its checkouts are removed
  before anything is recorded: a worker that filled the disk frees it first.

Failures of the lab itself still stop it: its bench or main changed
(`LabIntegrityError`), lab.db is unusable (`sqlite3.Error`, a busy
database), or the user interrupted it. When the lab's own records cannot be
written because the disk is full, it pauses (`LabPaused`): one message, and
`orchard run` resumes once there is room.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import time
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path

from orchard.errors import OrchardError, disk_full
from orchard.lab.db.connection import LabBusy
from orchard.lab.db.state import LabState
from orchard.lab.judge.measuring import LabIntegrityError
from orchard.lab.loop import stop
from orchard.lab.records.db import ExperimentRecord
from orchard.lab.records.events import ExperimentFailed
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import HypothesisStatus
from orchard.lab.records.judgment import Decision

REASON_CHARS = 300


class LabPaused(OrchardError):
    """The lab's own records could not be written (the disk is full): it stops, to be resumed."""


class Stage(StrEnum):
    """Where in one experiment's path the failure happened."""

    LAUNCH = "launch"
    WORK = "work"  # stopped while it ran: over a limit (lab/loop/disk_limits.py)
    COLLECT = "collect"
    JUDGE = "judge"
    RECORD = "record"


def lab_wide(error: BaseException) -> bool:
    """Whether `error` is the lab's own failure (stop the lab), not one experiment's."""
    return not isinstance(error, Exception) or isinstance(error, (LabIntegrityError, sqlite3.Error, LabBusy))


def describe(error: BaseException) -> str:
    """One line naming the error: its kind, its message (clipped), and a full disk in plain words."""
    text = " ".join(str(error).split()) or "no message"
    return f"{type(error).__name__}: {text}"[:REASON_CHARS] + (" (the disk is full)" if disk_full(error) else "")


def records_full(root: Path, error: BaseException) -> bool:
    """Whether `error` is the disk under the lab's records being full. What failed may not say so: SQLite's
    "disk I/O error" when it cannot grow its shared memory, git's "unable to write file" when the judge's clone
    of the target cannot be written."""
    free = shutil.disk_usage(root).free / 1024 / 1024
    return disk_full(error) or (isinstance(error, (OSError, sqlite3.Error, OrchardError)) and free < 1)


@contextlib.contextmanager
def pausing(root: Path) -> Iterator[None]:
    """A full disk under the lab's own records pauses the lab: one message (exit 1), no traceback."""
    try:
        yield
    except Exception as error:
        if not records_full(root, error):
            raise
        free = shutil.disk_usage(root).free / 1024 / 1024
        detail = describe(error).removesuffix(" (the disk is full)")
        raise LabPaused(f"the lab paused: its own records cannot be written, the disk is full ({free:,.1f} MB free "
                        f"in {root}; {detail}): make room, then `orchard run {root}` resumes where it "
                        "stopped") from None


def backup(state: LabState) -> str | None:
    """lab.db copied at the lab's start; on a full disk no copy is made (the last one stays) and the lab goes on,
    since a crashed run's checkout may be what fills it, and the resume frees that before it records anything."""
    try:
        state.backup()
    except (OSError, sqlite3.Error) as error:
        if not disk_full(error):
            raise
        return f"lab.db was not backed up at this start, the disk is full ({describe(error)}); the last copy stays"
    return None


def end_experiment(state: LabState, record: ExperimentRecord, stage: Stage, error: BaseException,
                   workers: int) -> str:
    """Record the failure: re-queue (launch) or KILL (anything later); returns the reason."""
    what = {Stage.LAUNCH: "could not be launched", Stage.WORK: "was stopped", Stage.COLLECT: "could not be collected",
            Stage.JUDGE: "could not be judged", Stage.RECORD: "could not be recorded"}[stage]
    reason = f"the experiment {what}: {describe(error)}"
    requeue = stage == Stage.LAUNCH
    with state.transaction():
        state.update_experiment(record.name, status=ExperimentStatus.DONE, finished_at=time.time(),
                                decision=None if requeue else Decision.KILL, reasons=[reason])
        state.update_hypothesis(record.hypothesis,
                                status=HypothesisStatus.OPEN if requeue else HypothesisStatus.KILLED)
        state.log(ExperimentFailed(record.hypothesis, stage, reason, requeue), record.name)
        if not requeue:
            stop.count_judged(state, workers, False)
    return reason
