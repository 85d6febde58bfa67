"""lab.db: the lab's source of truth (SQLite, WAL, one transaction per change).

Everything the lab knows lives here: hypotheses, experiments and their
judgments, measurements, the journal's events. The Markdown files are
rendered from it, so a crash never leaves them the only copy of anything,
and `orchard run` on an existing workspace resumes from it. A database made
by another schema version is refused, never migrated silently.

The connection, its transactions and its bounds are `connection.py`'s
`LabDatabase`; `LabState` adds the lab's records to it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any, TypeVar

from orchard.lab.db.connection import JSON_COLUMNS, LabDatabase, bounded
from orchard.lab.records.candidate import Candidate
from orchard.lab.records.db import (
    ExperimentRecord,
    HypothesisRecord,
    JournalEvent,
    Measurement,
    Unrecognized,
    of_type,
)
from orchard.lab.records.events import Event, EventKind
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import Hypothesis, HypothesisStatus, Lane
from orchard.lab.records.judgment import Decision, Judgment

E = TypeVar("E", bound=Event)


class LabState(LabDatabase):
    """The lab's database: its hypotheses, experiments, journal, measurements and baselines."""

    # -- hypotheses --------------------------------------------------------------

    def add_hypothesis(self, hypothesis: Hypothesis, *, source: str, parent: str | None = None) -> None:
        now = time.time()
        with self.transaction():
            self.db.execute(
                "INSERT INTO hypotheses VALUES (?, ?, 'open', ?, ?, 0, ?, ?)",
                (hypothesis.id, bounded(hypothesis.id, json.dumps(hypothesis.to_dict(), sort_keys=True)), source,
                 parent, now, now),
            )

    def has_hypothesis(self, hypothesis_id: str) -> bool:
        return self.db.execute("SELECT 1 FROM hypotheses WHERE id = ?", (hypothesis_id,)).fetchone() is not None

    def hypothesis(self, hypothesis_id: str) -> HypothesisRecord:
        row = self.db.execute("SELECT * FROM hypotheses WHERE id = ?", (hypothesis_id,)).fetchone()
        if row is None:
            raise KeyError(hypothesis_id)
        return HypothesisRecord.from_row(row)

    def hypotheses(self, status: HypothesisStatus | None = None) -> list[HypothesisRecord]:
        query, args = "SELECT * FROM hypotheses", tuple[str, ...]()
        if status is not None:
            query, args = query + " WHERE status = ?", (status,)
        rows = self.db.execute(query + " ORDER BY created_at, id", args)
        return [HypothesisRecord.from_row(row) for row in rows]

    def update_hypothesis(self, hypothesis_id: str, *, status: HypothesisStatus | None = None,
                          hypothesis: Hypothesis | None = None, attempt: bool = False) -> None:
        with self.transaction():
            if status is not None:
                self.db.execute("UPDATE hypotheses SET status = ? WHERE id = ?", (status, hypothesis_id))
            if hypothesis is not None:
                self.db.execute("UPDATE hypotheses SET data = ? WHERE id = ?",
                                (json.dumps(hypothesis.to_dict(), sort_keys=True), hypothesis_id))
            if attempt:
                self.db.execute("UPDATE hypotheses SET attempts = attempts + 1 WHERE id = ?", (hypothesis_id,))
            self.db.execute("UPDATE hypotheses SET updated_at = ? WHERE id = ?", (time.time(), hypothesis_id))

    # -- experiments --------------------------------------------------------------

    def add_experiment(self, name: str, hypothesis: str, worker: str, lane: Lane, loop: int,
                       target_base: str, bench_base: str, status: ExperimentStatus) -> None:
        with self.transaction():
            self.db.execute(
                "INSERT INTO experiments (name, hypothesis, worker, lane, loop, status, target_base, "
                "bench_base, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (name, hypothesis, worker, lane, loop, status, target_base, bench_base, time.time()),
            )

    def experiment(self, name: str) -> ExperimentRecord:
        row = self.db.execute("SELECT * FROM experiments WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise KeyError(name)
        return ExperimentRecord.from_row(row)

    def experiments(self, *statuses: ExperimentStatus, decision: Decision | None = None) -> list[ExperimentRecord]:
        """The experiments (in these statuses; with this decision), oldest first."""
        query, args = "SELECT * FROM experiments WHERE 1", list[str](statuses)
        if statuses:
            query += f" AND status IN ({','.join('?' * len(statuses))})"
        if decision is not None:
            query, args = query + " AND decision = ?", [*args, decision]
        rows = self.db.execute(query + " ORDER BY started_at, name", args)
        return [ExperimentRecord.from_row(row) for row in rows]

    def update_experiment(self, name: str, **fields: Any) -> None:
        """Set these columns; a `candidate` or `judgment` record is stored as its JSON."""
        allowed = {"status", "finished_at", "candidate", "judgment", "decision", "reasons", "branch",
                   "land_commit", "merge_commit", "target_base"}
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"unknown experiment fields: {sorted(unknown)}")
        values = [bounded(f"{name}.{k}", json.dumps(v.to_dict() if isinstance(v, (Candidate, Judgment)) else v,
                                                     sort_keys=True, default=str))
                  if k in JSON_COLUMNS else v for k, v in fields.items()]
        with self.transaction():
            self.db.execute(
                f"UPDATE experiments SET {', '.join(f'{k} = ?' for k in fields)} WHERE name = ?",
                (*values, name),
            )

    # -- events, measurements, baselines --------------------------------------------

    def log(self, event: Event, experiment: str | None = None) -> int:
        """Journal one event (its record's JSON); returns its id."""
        with self.transaction():
            cursor = self.db.execute(
                "INSERT INTO events (at, kind, experiment, data) VALUES (?, ?, ?, ?)",
                (time.time(), event.kind, experiment,
                 bounded(event.kind, json.dumps(event.to_dict(), sort_keys=True, default=str))),
            )
        return int(cursor.lastrowid or 0)

    def events(self, kind: EventKind | None = None, *, after: int = 0) -> list[JournalEvent[Event | Unrecognized]]:
        """The journal, oldest first (of one kind; only the events after the id `after`)."""
        query, args = "SELECT * FROM events WHERE id > ?", list[int | str]([after])
        if kind is not None:
            query, args = query + " AND kind = ?", [after, kind]
        return [JournalEvent.from_row(row) for row in self.db.execute(query + " ORDER BY id", args)]

    def events_of(self, record: type[E]) -> list[JournalEvent[E]]:
        """The events of one record type, oldest first, each with its record typed."""
        return of_type(self.events(record.kind), record)

    def add_measurement(self, kind: str, commit_id: str, metrics: Mapping[str, float | None],
                        experiment: str | None = None) -> None:
        with self.transaction():
            self.db.execute(
                "INSERT INTO measurements (at, kind, commit_id, experiment, metrics) VALUES (?, ?, ?, ?, ?)",
                (time.time(), kind, commit_id, experiment, json.dumps(dict(metrics), sort_keys=True)),
            )

    def measurements(self, kind: str | None = None) -> list[Measurement]:
        query, args = "SELECT * FROM measurements", tuple[str, ...]()
        if kind is not None:
            query, args = query + " WHERE kind = ?", (kind,)
        return [Measurement.from_row(row) for row in self.db.execute(query + " ORDER BY id", args)]

    def baseline(self, commit_id: str) -> str | None:
        row = self.db.execute("SELECT binary FROM baselines WHERE commit_id = ?", (commit_id,)).fetchone()
        return None if row is None else row[0]

    def add_baseline(self, commit_id: str, binary: str) -> None:
        with self.transaction():
            self.db.execute("INSERT OR REPLACE INTO baselines VALUES (?, ?, ?)", (commit_id, binary, time.time()))
