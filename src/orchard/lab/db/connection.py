"""lab.db's connection: opened (or created, or refused when another schema version made it), its transactions,
the wait for another process's write lock, and the meta table. `state.py`'s `LabState` adds the lab's records.

Two bounds keep it usable whatever a worker writes and whoever else writes:
no stored value is larger than `MAX_VALUE_BYTES` (`RecordTooLarge`, which
ends that one experiment), and a writer waits at most `BUSY_TIMEOUT_S` for
another process's write lock before it gives up with one message (`LabBusy`,
exit 2) and nothing changed. A damaged file (a page zeroed, the file cut
mid-write) is refused with the way back (`LabDamaged`: `orchard recover`
restores `backup()`'s last good copy).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Self

from orchard import __version__
from orchard.errors import OrchardError, UsageError
from orchard.lab.db import lock_holder
from orchard.lab.db.schema import SCHEMA, SCHEMA_VERSION
from orchard.lab.db.workspace_lock import holder

# A candidate's patch is at most [target] max_patch_kb (itself at most 16 MiB); the rest of a record
# (file lists, report, reasons) gets 4 MiB more. Anything larger is refused, never stored.
MAX_VALUE_BYTES = (16 + 4) * 1024 * 1024
BUSY_TIMEOUT_S = 10.0  # how long a writer waits for another process's write lock on lab.db

DB_NAME = "lab.db"
BACKUP_NAME = "lab.db.backup"  # the last good copy, beside it: made at the lab's start and after each landing


class LabBusy(UsageError):
    """Another process held lab.db's write lock for longer than a writer waits."""


class LabDamaged(UsageError):
    """lab.db is damaged (a page zeroed, the file cut mid-write): refused with the way back, nothing changed."""


def damaged(path: Path, detail: str) -> LabDamaged:
    """The message for a damaged lab.db at `path`: what SQLite found, and how to get the lab back."""
    backup = path.with_name(BACKUP_NAME)
    way = (f"`orchard recover {path.parent}` restores its last good backup ({backup}) and replays JOURNAL.md "
           "after it, keeping the damaged file" if backup.is_file() else f"it has no backup ({backup}) to restore")
    return LabDamaged(f"{path}: damaged ({detail}); {way}; nothing was changed")


def problems(db: sqlite3.Connection, pragma: str = "quick_check") -> list[str]:
    """What SQLite's own check of a database finds wrong (a page zeroed, a file cut short); empty when intact."""
    try:
        found = [str(row[0]) for row in db.execute(f"PRAGMA {pragma}").fetchall()]
    except sqlite3.DatabaseError as error:
        return [str(error)]
    return [] if found == ["ok"] else found


class RecordTooLarge(OrchardError):
    """A value for lab.db over `MAX_VALUE_BYTES`: refused (it ends the experiment it belongs to)."""


def bounded(what: str, text: str) -> str:
    if len(text) > MAX_VALUE_BYTES:  # characters: at least one byte each, so this is a lower bound
        raise RecordTooLarge(f"{what}: {len(text):,} characters, over lab.db's cap of {MAX_VALUE_BYTES:,} bytes")
    return text


def _free_mb(path: Path) -> float:
    return shutil.disk_usage(path.parent).free / 1024 / 1024


JSON_COLUMNS = {"data", "candidate", "judgment", "reasons", "metrics"}


class LabDatabase:
    """lab.db, opened. Every write is its own transaction unless grouped in `transaction()`."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        fresh = not self.path.exists()
        if not fresh and not self.path.is_file():
            raise UsageError(f"{self.path}: not a lab database (not a regular file); nothing was changed")
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
    def open(cls, workspace: Path) -> Self:
        return cls(Path(workspace) / DB_NAME)

    @classmethod
    def open_readonly(cls, workspace: Path) -> Self:
        return cls(Path(workspace) / DB_NAME, readonly=True)

    def close(self) -> None:
        self.db.close()

    def _check_version(self) -> None:
        try:
            found = self.meta("schema_version")
            creator = self.meta("created_by") or "unknown"
        except sqlite3.DatabaseError as error:
            if getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_CORRUPT:
                raise damaged(self.path, str(error)) from None
            if getattr(error, "sqlite_errorcode", None) != sqlite3.SQLITE_NOTADB and _free_mb(self.path) < 1:
                raise OrchardError(f"{self.path}: cannot be opened ({error}): the disk is full "
                                   f"({_free_mb(self.path):,.1f} MB free); make room, then run again") from None
            raise UsageError(f"{self.path}: not a lab database ({error}); nothing was changed") from None
        if found != str(SCHEMA_VERSION):
            newer = found is not None and found.isdigit() and int(found) > SCHEMA_VERSION
            raise UsageError(
                f"{self.path}: made by orchard {creator} (lab schema {found}); this orchard "
                f"{__version__} reads schema {SCHEMA_VERSION}. "
                + ("Upgrade orchard to open it." if newer else "Use the orchard that made it.")
                + " Nothing was changed."
            )

    def check_intact(self) -> None:
        """Refuse a damaged lab.db with the way back (`LabDamaged`) before anything reads it."""
        found = problems(self.db)
        if found:
            more = f" and {len(found) - 1} more problems" if len(found) > 1 else ""
            raise damaged(self.path, found[0] + more)

    def backup(self) -> Path:
        """lab.db copied whole by SQLite's online backup; the last copy is replaced only by one found intact."""
        target = self.path.with_name(BACKUP_NAME)
        partial = target.with_name(f"{BACKUP_NAME}.partial")
        partial.unlink(missing_ok=True)
        copy = sqlite3.connect(partial)
        try:
            self.db.backup(copy)
            copy.execute("PRAGMA journal_mode=DELETE")  # one file: read or copied back, it makes no WAL beside it
            found = problems(copy)
        except BaseException:
            copy.close()
            partial.unlink(missing_ok=True)  # a copy cut short (a full disk) takes no room
            raise
        copy.close()
        if found:
            partial.unlink()
            raise damaged(self.path, found[0])
        os.replace(partial, target)
        return target

    @contextlib.contextmanager
    def _waiting(self) -> Iterator[None]:
        """A statement that may wait for another process's lock: past `BUSY_TIMEOUT_S`, one clear message."""
        try:
            yield
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) and "busy" not in str(error):
                raise
            raise LabBusy(f"{self.path}: {self._blocker()} held its write lock for more than {BUSY_TIMEOUT_S:g} s; "
                          "nothing was changed; try again in a moment") from None

    def _blocker(self) -> str:
        """The process that held lab.db's lock (never this one, which may be the lab's own run)."""
        run = holder(self.path.parent)
        pids = lock_holder.holders(self.path)
        if pids:
            return ", ".join(f"the `orchard run` of pid {pid}" if pid == run else lock_holder.describe(pid)
                             for pid in pids)
        return f"the `orchard run` of pid {run}" if run and run != os.getpid() else "another process"

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

