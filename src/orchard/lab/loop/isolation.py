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
- `collect`, `judge`, `record`: the candidate cannot be judged: KILL, with
  the error as the reason.

Failures of the lab itself still stop it: its bench or main changed
(`LabIntegrityError`), lab.db is unusable (`sqlite3.Error`, a busy
database), or the user interrupted it.
"""

from __future__ import annotations

import errno
import sqlite3
import time
from enum import StrEnum

from orchard.lab.db.state import LabBusy, LabState
from orchard.lab.judge.measuring import LabIntegrityError
from orchard.lab.loop import stop
from orchard.lab.records.db import ExperimentRecord
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import HypothesisStatus
from orchard.lab.records.judgment import Decision

REASON_CHARS = 300
EVENT = "experiment-error"


class Stage(StrEnum):
    """Where in one experiment's path the failure happened."""

    LAUNCH = "launch"
    COLLECT = "collect"
    JUDGE = "judge"
    RECORD = "record"


def lab_wide(error: BaseException) -> bool:
    """Whether `error` is the lab's own failure (stop the lab), not one experiment's."""
    return not isinstance(error, Exception) or isinstance(error, (LabIntegrityError, sqlite3.Error, LabBusy))


def describe(error: BaseException) -> str:
    """One line naming the error: its kind, its message (clipped), and a full disk in plain words."""
    text = " ".join(str(error).split()) or "no message"
    full = isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)
    full = full or "No space left on device" in text
    return f"{type(error).__name__}: {text}"[:REASON_CHARS] + (" (the disk is full)" if full else "")


def end_experiment(state: LabState, record: ExperimentRecord, stage: Stage, error: BaseException,
                   workers: int) -> str:
    """Record the failure: re-queue (launch) or KILL (anything later); returns the reason."""
    what = {Stage.LAUNCH: "could not be launched", Stage.COLLECT: "could not be collected",
            Stage.JUDGE: "could not be judged", Stage.RECORD: "could not be recorded"}[stage]
    reason = f"the experiment {what}: {describe(error)}"
    requeue = stage == Stage.LAUNCH
    with state.transaction():
        state.update_experiment(record.name, status=ExperimentStatus.DONE, finished_at=time.time(),
                                decision=None if requeue else Decision.KILL, reasons=[reason])
        state.update_hypothesis(record.hypothesis,
                                status=HypothesisStatus.OPEN if requeue else HypothesisStatus.KILLED)
        state.log(EVENT, {"hypothesis": record.hypothesis, "stage": stage, "reason": reason,
                          "requeued": requeue}, record.name)
        if not requeue:
            stop.count_judged(state, workers, False)
    return reason
