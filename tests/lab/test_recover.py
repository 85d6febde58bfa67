"""A damaged lab.db (issue 31, item 5): refused with the way back; `orchard recover` loses nothing published.

On main a page of lab.db zeroed made `orchard run`, `status` and `report`
traceback (`sqlite3.DatabaseError: database disk image is malformed`), a
file cut mid-write was called "not a lab database" with no way back, and
there was no backup to go back to. Here lab.db is copied whole (SQLite's
online backup) at the lab's start and after each landing, and `orchard
recover` restores that copy and replays the journal's later entries from
JOURNAL.md, keeping the damaged file beside it.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.lab.lab_helpers import TARGET_FILES, make_repo
from tests.lab.test_bad_output import _lab, _orchard

PAGE = 4096


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lab that landed one win and then stopped: its final verdict and stop come after the landing's backup."""
    base = tmp_path_factory.mktemp("recover")
    root = _lab(base, make_repo(base / "target-repo", TARGET_FILES), {})
    result = _orchard("run", root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not (root / "lab.db-wal").exists(), "every connection closed: lab.db is one file"
    return root


@pytest.fixture
def lab(ran: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(ran, tmp_path / "ws", symlinks=True))


def _events(path: Path) -> list[tuple[object, ...]]:
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return [tuple(row) for row in db.execute("SELECT * FROM events ORDER BY id")]
    finally:
        db.close()


def _damage(path: Path, how: str) -> None:
    """A page of the journal's table zeroed, or the file cut inside a page."""
    if how == "zeroed-page":
        db = sqlite3.connect(path)
        (root_page,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'events'").fetchone()
        db.close()
        with path.open("r+b") as handle:
            handle.seek((root_page - 1) * PAGE)
            handle.write(bytes(PAGE))
    else:
        os.truncate(path, path.stat().st_size - 3 * PAGE - 1000)


@pytest.mark.parametrize("how", ["zeroed-page", "cut"])
def test_a_damaged_lab_db_is_refused_naming_the_damage_and_the_way_back(lab: Path, how: str) -> None:
    _damage(lab / "lab.db", how)
    damaged = (lab / "lab.db").read_bytes()
    for command in ("run", "status", "report"):
        result = _orchard(command, lab)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1, (command, result.stderr)
        assert f"{lab / 'lab.db'}: damaged (" in lines[0], lines[0]
        assert f"`orchard recover {lab}` restores its last good backup ({lab / 'lab.db.backup'})" in lines[0]
    assert (lab / "lab.db").read_bytes() == damaged, "nothing was changed"


def test_recover_restores_the_backup_and_replays_the_journal_after_it(lab: Path) -> None:
    events, journal = _events(lab / "lab.db"), (lab / "JOURNAL.md").read_bytes()
    backed_up = _events(lab / "lab.db.backup")
    assert 0 < len(backed_up) < len(events), "the backup is the landing's; the final verdict and stop came after"
    _damage(lab / "lab.db", "zeroed-page")
    damaged = (lab / "lab.db").read_bytes()
    result = _orchard("recover", lab)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"replayed {len(events) - len(backed_up)} later journal events from JOURNAL.md" in result.stdout
    assert _events(lab / "lab.db") == events, "every published event is back, as it was stored"
    assert (lab / "JOURNAL.md").read_bytes() == journal
    (kept,) = lab.glob("lab.db.before-recover-*")
    assert kept.read_bytes() == damaged, "the damaged file is kept, never deleted"
    assert f"kept {kept}" in result.stdout
    status = _orchard("status", lab)
    assert status.returncode == 0, status.stderr


def test_recover_says_which_later_entries_it_could_not_replay(lab: Path) -> None:
    """Entries without their record line (an older orchard wrote them): named, and kept in the journal copy."""
    events, backed_up = _events(lab / "lab.db"), _events(lab / "lab.db.backup")
    journal = lab / "JOURNAL.md"
    later = {str(row[0]) for row in events[len(backed_up):]}
    kept_lines = [line for line in journal.read_text().splitlines()
                  if not any(f'"id": {i},' in line for i in later)]
    journal.write_text("\n".join(kept_lines) + "\n")
    _damage(lab / "lab.db", "cut")
    result = _orchard("recover", lab)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "replayed 0 later journal events" in result.stdout
    assert re.search(rf"could not replay {len(later)} later JOURNAL\.md entries", result.stdout), result.stdout
    assert _events(lab / "lab.db") == backed_up
    (copy,) = lab.glob("JOURNAL.md.before-recover-*")
    assert copy.read_text() == "\n".join(kept_lines) + "\n"


@pytest.mark.parametrize("backup", ["missing", "damaged"])
def test_recover_without_a_good_backup_changes_nothing(lab: Path, backup: str) -> None:
    if backup == "missing":
        (lab / "lab.db.backup").unlink()
    else:
        _damage(lab / "lab.db.backup", "zeroed-page")
    _damage(lab / "lab.db", "zeroed-page")
    before = sorted(p.name for p in lab.iterdir()), (lab / "lab.db").read_bytes()
    result = _orchard("recover", lab)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert ("no backup to restore" if backup == "missing" else "the backup is damaged too") in result.stderr
    assert (sorted(p.name for p in lab.iterdir()), (lab / "lab.db").read_bytes()) == before


def test_recover_refuses_an_intact_lab_db(lab: Path) -> None:
    """Restoring over a good lab.db would set back what the journal does not hold (the experiments' states)."""
    before = (lab / "lab.db").read_bytes()
    result = _orchard("recover", lab)
    assert result.returncode == 2 and "intact (SQLite's check finds nothing wrong): nothing to recover" in result.stderr
    assert (lab / "lab.db").read_bytes() == before and not list(lab.glob("*before-recover*"))
