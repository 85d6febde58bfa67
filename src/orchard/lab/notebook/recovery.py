"""`orchard recover LAB`: a damaged lab.db replaced by its last good backup, and JOURNAL.md's later entries replayed.

lab.db is copied whole (SQLite's online backup) to `lab.db.backup` at the
lab's start and after each landing, and the copy replaces the last one only
when SQLite's own check finds it intact. Each JOURNAL.md entry ends with its
event's row as lab.db stored it (`journal.record_line`), so the events
published after the backup are replayed from there. The damaged file and the
journal as it was are kept beside them with the time of the recovery;
nothing is deleted. What the journal does not hold (the state of hypotheses
and experiments, the loop's counters) is as the backup had it: an experiment
started after the backup is tried again from its hypothesis.
"""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from orchard.errors import UsageError
from orchard.lab.db import workspace_lock
from orchard.lab.db.connection import BACKUP_NAME, DB_NAME, problems
from orchard.lab.db.state import LabState
from orchard.lab.notebook.files import write_atomic
from orchard.lab.notebook.journal import RECORD, recorded_rows, render_journal, when

ENTRY = "## "  # every JOURNAL.md entry starts with its dated heading


@dataclass(frozen=True)
class Recovered:
    """What `orchard recover` did: the files it kept, the events it replayed, the entries it could not."""

    restored_from: Path
    kept: tuple[Path, ...]  # the damaged lab.db (and its WAL), the journal as it was
    backup_until: float | None  # the time of the backup's last event
    replayed: int
    not_replayed: tuple[str, ...]  # headings of later entries written without their record (an older orchard)

    def lines(self) -> list[str]:
        until = "no event" if self.backup_until is None else f"its last event at {when(self.backup_until)}"
        lines = [f"restored lab.db from {self.restored_from} ({until})",
                 f"replayed {self.replayed} later journal events from JOURNAL.md",
                 *(f"kept {path}" for path in self.kept)]
        if self.not_replayed:
            lines.append(f"could not replay {len(self.not_replayed)} later JOURNAL.md entries (written without their "
                         "record by an older orchard; they stay in the journal kept above): "
                         + "; ".join(self.not_replayed))
        return [*lines, "hypotheses, experiments and the loop's counters are as the backup had them: an experiment "
                        "started after it is tried again"]


def _checked_backup(root: Path) -> Path:
    backup = root / BACKUP_NAME
    if not backup.is_file():
        raise UsageError(f"{backup}: no backup to restore (one is made when `orchard run` starts and after each "
                         "landing); nothing was changed")
    found = _problems(backup, "integrity_check")
    if found:
        raise UsageError(f"{backup}: the backup is damaged too ({found[0]}); nothing was changed")
    return backup


def _set_aside(root: Path, stamp: str) -> tuple[Path, ...]:
    """The damaged lab.db, its WAL files and the journal as it was, renamed with the recovery's time."""
    kept = []
    for name in (DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm", "JOURNAL.md"):
        path = root / name
        if path.exists():
            aside = root / f"{name}.before-recover-{stamp}"
            (shutil.copy2 if name == "JOURNAL.md" else shutil.move)(path, aside)
            kept.append(aside)
    return tuple(kept)


def _restore(backup: Path, path: Path) -> None:
    """The backup copied into a new lab.db by SQLite's online backup."""
    source = sqlite3.connect(f"{backup.resolve().as_uri()}?mode=ro", uri=True)
    target = sqlite3.connect(path)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


def recover(root: Path) -> Recovered:
    """Restore `root`'s lab.db from its backup and replay what JOURNAL.md holds after it (no lab running)."""
    root = Path(root)
    with workspace_lock.hold(root):
        return _recover(root)


def _problems(path: Path, pragma: str) -> list[str]:
    """What SQLite's `pragma` check finds wrong in the file at `path`: read as it is, leaving no WAL file beside it."""
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        return problems(db, pragma)
    finally:
        db.close()


def _recover(root: Path) -> Recovered:
    if (root / DB_NAME).is_file() and not _problems(root / DB_NAME, "quick_check"):
        raise UsageError(f"{root / DB_NAME}: intact (SQLite's check finds nothing wrong): nothing to recover; "
                         "nothing was changed")
    backup = _checked_backup(root)
    journal = root / "JOURNAL.md"
    text = journal.read_text(encoding="utf-8", errors="replace") if journal.exists() else ""
    kept = _set_aside(root, datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ"))
    _restore(backup, root / DB_NAME)
    state = LabState(root / DB_NAME)
    try:
        last_id, last_at, count = state.db.execute(
            "SELECT coalesce(max(id), 0), max(at), count(*) FROM events").fetchone()
        later = [row for row in recorded_rows(text) if int(row["id"]) > last_id]
        with state.transaction():
            for row in later:
                state.db.execute("INSERT INTO events (id, at, kind, experiment, data) VALUES (?, ?, ?, ?, ?)",
                                 (int(row["id"]), float(row["at"]), str(row["kind"]), row["experiment"],
                                  str(row["data"])))
        write_atomic(journal, render_journal(state))
    finally:
        state.close()
    return Recovered(backup, kept, last_at, len(later), _unrecorded(text, count))


def _unrecorded(text: str, backed_up: int) -> tuple[str, ...]:
    """Headings of the entries after the backup's `backed_up` events that hold no record line (so nothing of them
    could be replayed). By position, one entry an event, oldest first: a heading's time is to the second, and
    the backup's last event is often in the same second as the next ones."""
    entries = text.split("\n" + ENTRY)[1:]
    return tuple(entry.partition("\n")[0] for entry in entries[backed_up:] if "\n" + RECORD not in entry)
