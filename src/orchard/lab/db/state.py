"""lab.db: the lab's source of truth (SQLite, WAL, one transaction per change).

Everything the lab knows lives here: hypotheses, experiments and their
judgments, measurements, the journal's events. The Markdown files are
rendered from it, so a crash never leaves them the only copy of anything,
and `orchard run` on an existing workspace resumes from it. A database made
by another schema version is refused, never migrated silently.

Two bounds keep it usable whatever a worker writes and whoever else writes:
no stored value is larger than `MAX_VALUE_BYTES` (`RecordTooLarge`, which
ends that one experiment), and a writer waits at most `BUSY_TIMEOUT_S` for
another process's write lock before it gives up with one message (`LabBusy`,
exit 2) and nothing changed.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from orchard import __version__
from orchard.errors import OrchardError, UsageError
from orchard.lab.db.schema import SCHEMA, SCHEMA_VERSION
from orchard.lab.db.workspace_lock import holder
from orchard.lab.records.candidate import Candidate
from orchard.lab.records.db import ExperimentRecord, HypothesisRecord, JournalEvent, Measurement
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import Hypothesis, HypothesisStatus, Lane
from orchard.lab.records.judgment import Judgment

# A candidate's patch is at most [target] max_patch_kb (itself at most 16 MiB); the rest of a record
# (file lists, report, reasons) gets 4 MiB more. Anything larger is refused, never stored.
MAX_VALUE_BYTES = (16 + 4) * 1024 * 1024
BUSY_TIMEOUT_S = 10.0  # how long a writer waits for another process's write lock on lab.db

DB_NAME = "lab.db"


class LabBusy(UsageError):
    """Another process held lab.db's write lock for longer than a writer waits."""


class RecordTooLarge(OrchardError):
    """A value for lab.db over `MAX_VALUE_BYTES`: refused (it ends the experiment it belongs to)."""


def _bounded(what: str, text: str) -> str:
    if len(text) > MAX_VALUE_BYTES:  # characters: at least one byte each, so this is a lower bound
        raise RecordTooLarge(f"{what}: {len(text):,} characters, over lab.db's cap of {MAX_VALUE_BYTES:,} bytes")
    return text


_JSON_COLUMNS = {"data", "candidate", "judgment", "reasons", "metrics"}


class LabState:
    """The lab's database. Every write is its own transaction unless grouped in `transaction()`."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        fresh = not self.path.exists()
        if readonly:
            if fresh:
                raise UsageError(f"{self.path}: no lab database here (run `orchard run` first)")
            # a reader for the dashboard: it can never write, and under WAL it never blocks the lab's writes
            self.db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S,
                                      isolation_level=None, check_same_thread=False)
        else:
            self.db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        self.db.row_factory = sqlite3.Row
        self._depth = 0
        try:
            if not fresh:
                self._check_version()  # before any pragma writes: a refused file is left exactly as it was
            if readonly:
                return
            with self._waiting():
                self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            self.db.execute("PRAGMA synchronous=FULL")
            if fresh:
                self._create()
        except BaseException:
            self.db.close()
            raise

    def _create(self) -> None:
        with self.transaction():
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    self.db.execute(statement)
            self._put("schema_version", str(SCHEMA_VERSION))
            self._put("created_by", __version__)
            self._put("created_at", str(time.time()))

    @classmethod
    def open(cls, workspace: Path) -> LabState:
        return cls(Path(workspace) / DB_NAME)

    @classmethod
    def open_readonly(cls, workspace: Path) -> LabState:
        return cls(Path(workspace) / DB_NAME, readonly=True)

    def close(self) -> None:
        self.db.close()

    def _check_version(self) -> None:
        try:
            found = self.meta("schema_version")
            creator = self.meta("created_by") or "unknown"
        except sqlite3.DatabaseError as error:
            raise UsageError(f"{self.path}: not a lab database ({error}); nothing was changed") from None
        if found != str(SCHEMA_VERSION):
            newer = found is not None and found.isdigit() and int(found) > SCHEMA_VERSION
            raise UsageError(
                f"{self.path}: made by orchard {creator} (lab schema {found}); this orchard "
                f"{__version__} reads schema {SCHEMA_VERSION}. "
                + ("Upgrade orchard to open it." if newer else "Use the orchard that made it.")
                + " Nothing was changed."
            )

    @contextlib.contextmanager
    def _waiting(self) -> Iterator[None]:
        """A statement that may wait for another process's lock: past `BUSY_TIMEOUT_S`, one clear message."""
        try:
            yield
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) and "busy" not in str(error):
                raise
            pid = holder(self.path.parent)
            who = f"the `orchard run` of pid {pid}" if pid else "another process"
            raise LabBusy(f"{self.path}: {who} held its write lock for more than {BUSY_TIMEOUT_S:g} s; "
                          "nothing was changed; try again in a moment") from None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """All writes inside commit together or not at all (nesting joins the outer one)."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        with self._waiting():
            self.db.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        else:
            self.db.execute("COMMIT")
        finally:
            self._depth = 0

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Reads inside see one consistent state of the database (a read transaction, short by design)."""
        if self._depth:
            yield
            return
        self.db.execute("BEGIN DEFERRED")
        self._depth = 1
        try:
            yield
        finally:
            self._depth = 0
            self.db.execute("COMMIT")

    def version(self) -> tuple[int, int]:
        """Equal values mean nothing was written since: other connections' commits and this one's own writes."""
        other = self.db.execute("PRAGMA data_version").fetchone()[0]
        return int(other), self.db.total_changes

    # -- meta ------------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def _put(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction():
            self._put(key, value)

    def counter(self, key: str) -> int:
        """A loop counter (judged, merged, idle loops, ...); 0 before its first count."""
        return int(self.meta(key) or 0)

    def set_counter(self, key: str, value: int) -> None:
        self.set_meta(key, str(value))

    # -- hypotheses --------------------------------------------------------------

    def add_hypothesis(self, hypothesis: Hypothesis, *, source: str, parent: str | None = None) -> None:
        now = time.time()
        with self.transaction():
            self.db.execute(
                "INSERT INTO hypotheses VALUES (?, ?, 'open', ?, ?, 0, ?, ?)",
                (hypothesis.id, _bounded(hypothesis.id, json.dumps(hypothesis.to_dict(), sort_keys=True)), source,
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

    def experiments(self, *statuses: ExperimentStatus) -> list[ExperimentRecord]:
        query, args = "SELECT * FROM experiments", tuple(statuses)
        if statuses:
            query += f" WHERE status IN ({','.join('?' * len(statuses))})"
        rows = self.db.execute(query + " ORDER BY started_at, name", args)
        return [ExperimentRecord.from_row(row) for row in rows]

    def update_experiment(self, name: str, **fields: Any) -> None:
        """Set these columns; a `candidate` or `judgment` record is stored as its JSON."""
        allowed = {"status", "finished_at", "candidate", "judgment", "decision", "reasons", "branch",
                   "land_commit", "merge_commit", "target_base"}
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"unknown experiment fields: {sorted(unknown)}")
        values = [_bounded(f"{name}.{k}", json.dumps(v.to_dict() if isinstance(v, (Candidate, Judgment)) else v,
                                                     sort_keys=True, default=str))
                  if k in _JSON_COLUMNS else v for k, v in fields.items()]
        with self.transaction():
            self.db.execute(
                f"UPDATE experiments SET {', '.join(f'{k} = ?' for k in fields)} WHERE name = ?",
                (*values, name),
            )

    # -- events, measurements, baselines --------------------------------------------

    def log(self, kind: str, data: Mapping[str, Any], experiment: str | None = None) -> None:
        with self.transaction():
            self.db.execute(
                "INSERT INTO events (at, kind, experiment, data) VALUES (?, ?, ?, ?)",
                (time.time(), kind, experiment, _bounded(kind, json.dumps(dict(data), sort_keys=True, default=str))),
            )

    def events(self, kind: str | None = None) -> list[JournalEvent]:
        query, args = "SELECT * FROM events", tuple[str, ...]()
        if kind is not None:
            query, args = query + " WHERE kind = ?", (kind,)
        return [JournalEvent.from_row(row) for row in self.db.execute(query + " ORDER BY id", args)]

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
