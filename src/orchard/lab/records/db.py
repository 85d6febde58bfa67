"""The typed records lab.db returns: a hypothesis, an experiment, a journal event (its typed record), a measurement.

Each is built from its SQLite row in one place (`from_row`), so every reader
of the store gets the same typed view and none reads a row by key.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Generic, TypeVar

from orchard.lab.records.candidate import Candidate
from orchard.lab.records.events import (
    AgentHung,
    AgentRetried,
    BacklogChanged,
    BaselineRebuilt,
    Event,
    ExperimentFailed,
    ExperimentHost,
    ExperimentStarted,
    LabStopped,
    LauncherFailed,
    OpportunitiesRead,
    RefillStopped,
    SandboxNoted,
    WorkerStopped,
)
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hack_findings import WinHeld, WinSettled
from orchard.lab.records.hypothesis import Hypothesis, HypothesisStatus, Lane
from orchard.lab.records.judge_host import JudgeLost, JudgeStarted
from orchard.lab.records.judgment import Decision, Judgment, JudgmentEntry
from orchard.lab.records.lab_start import LabStart
from orchard.lab.records.land_steps import (
    BranchPushed,
    Committed,
    Confirmed,
    MainChecked,
    MainPublished,
    Merged,
    Rebased,
    Reverted,
    RevertPublished,
)
from orchard.lab.records.measured_events import FinalVerdictTaken, Swept
from orchard.lab.records.revisit_events import Revisited
from orchard.lab.records.steering_events import ExperimentStopped, Paused, Resumed, StopAsked


@dataclass(frozen=True)
class HypothesisRecord:
    """A hypothesis as the backlog holds it: the hypothesis, where it stands, where it came from."""

    hypothesis: Hypothesis
    status: HypothesisStatus
    source: str  # user, opportunities, planner, iterate
    parent: str | None  # the hypothesis an ITERATE sharpened
    attempts: int
    created_at: float
    updated_at: float

    @property
    def id(self) -> str:
        return self.hypothesis.id

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> HypothesisRecord:
        return cls(_stored_hypothesis(row["id"], row["data"]), HypothesisStatus(row["status"]),
                   row["source"], row["parent"], row["attempts"], row["created_at"], row["updated_at"])


@lru_cache(maxsize=16384)
def _stored_hypothesis(hypothesis_id: str, data: str) -> Hypothesis:
    """A stored hypothesis parsed once per content: the loop reads the whole backlog on every pass (2 s a pass at
    1,200 open hypotheses under load, when each read parsed them all again); `Hypothesis` is immutable, so one
    parsed value serves every reader."""
    return Hypothesis.from_dict(json.loads(data), source=hypothesis_id, stored=True)


@dataclass(frozen=True)
class ExperimentRecord:
    """One experiment as lab.db holds it, with its candidate and judgment once it has them."""

    name: str
    hypothesis: str
    worker: str
    lane: Lane
    loop: int
    status: ExperimentStatus
    target_base: str
    bench_base: str
    started_at: float
    finished_at: float | None
    candidate: Candidate | None
    judgment: Judgment | None
    decision: Decision | None
    reasons: list[str]
    branch: str | None
    land_commit: str | None
    merge_commit: str | None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> ExperimentRecord:
        def loaded(key: str) -> Any:
            return None if row[key] is None else json.loads(row[key])

        candidate, judgment = loaded("candidate"), loaded("judgment")
        return cls(
            name=row["name"], hypothesis=row["hypothesis"], worker=row["worker"], lane=Lane(row["lane"]),
            loop=row["loop"], status=ExperimentStatus(row["status"]), target_base=row["target_base"],
            bench_base=row["bench_base"], started_at=row["started_at"], finished_at=row["finished_at"],
            candidate=None if candidate is None else Candidate.from_dict(candidate),
            judgment=None if judgment is None else Judgment.from_dict(judgment),
            decision=None if row["decision"] is None else Decision(row["decision"]),
            reasons=loaded("reasons") or [], branch=row["branch"], land_commit=row["land_commit"],
            merge_commit=row["merge_commit"],
        )

    @property
    def cost_usd(self) -> float:
        """What the worker's agent reported spending (0 when it reported nothing)."""
        return float(self.candidate.usage.cost_usd or 0) if self.candidate else 0.0


@dataclass(frozen=True)
class Unrecognized:
    """An event of a kind this orchard does not write (an older orchard's), kept as it was stored."""

    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return self.data


EVENT_TYPES: dict[str, type[Event]] = {cls.kind: cls for cls in (
    LabStart, ExperimentStarted, ExperimentHost, JudgmentEntry, BacklogChanged, LauncherFailed, AgentRetried, AgentHung,
    SandboxNoted, ExperimentFailed,
    WorkerStopped, BaselineRebuilt, RefillStopped, OpportunitiesRead, Swept, FinalVerdictTaken, LabStopped,
    Committed, Rebased, Confirmed, BranchPushed, Merged, MainPublished, MainChecked, Reverted, RevertPublished,
    JudgeStarted, JudgeLost, WinHeld, WinSettled, StopAsked, ExperimentStopped, Paused, Resumed, Revisited)}
E = TypeVar("E", covariant=True)
R = TypeVar("R", bound=Event)


@lru_cache(maxsize=16384)
def _stored_event(kind: str, data: str) -> Event | Unrecognized:
    """An event parsed once per content: the dashboard and the notebook read the journal again and again, and an
    event never changes (its record is frozen, so one parsed value serves every reader)."""
    record = EVENT_TYPES.get(kind)
    loaded = json.loads(data)
    return Unrecognized(loaded) if record is None else record.from_dict(loaded)


@dataclass(frozen=True)
class JournalEvent(Generic[E]):
    """One journal entry: what happened (`kind`, and its typed record `event`), when, to which experiment."""

    id: int
    at: float
    kind: str  # an `EventKind`, or an older orchard's kind (its event `Unrecognized`)
    experiment: str | None
    event: E

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> JournalEvent[Event | Unrecognized]:
        return JournalEvent(row["id"], row["at"], row["kind"], row["experiment"],
                            _stored_event(row["kind"], row["data"]))


def of_type(events: Iterable[JournalEvent[Event | Unrecognized]], record: type[R]) -> list[JournalEvent[R]]:
    """The events whose record is a `record`, oldest first, each typed as one."""
    return [JournalEvent(e.id, e.at, e.kind, e.experiment, e.event) for e in events if isinstance(e.event, record)]


@dataclass(frozen=True)
class Measurement:
    """Medians per metric of one commit, measured by the lab (baseline, main after a merge)."""

    id: int
    at: float
    kind: str  # baseline, main
    commit_id: str
    experiment: str | None
    metrics: dict[str, float | None]

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Measurement:
        return cls(row["id"], row["at"], row["kind"], row["commit_id"], row["experiment"], json.loads(row["metrics"]))
