"""The typed records lab.db returns: a hypothesis, an experiment, a journal event, a measurement.

Each is built from its SQLite row in one place (`from_row`), so every reader
of the store gets the same typed view and none reads a row by key.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from orchard.lab.records.candidate import Candidate
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import Hypothesis, HypothesisStatus, Lane
from orchard.lab.records.judgment import Decision, Judgment


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
class JournalEvent:
    """One journal entry: what happened (`kind`), when, to which experiment, with its details."""

    id: int
    at: float
    kind: str
    experiment: str | None
    data: dict[str, Any]

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> JournalEvent:
        return cls(row["id"], row["at"], row["kind"], row["experiment"], json.loads(row["data"]))


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
