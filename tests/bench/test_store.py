"""The result store: append-only JSONL, a summary beside it, an SQLite index."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from orchard.bench.results.store import RunWriter, latest_rows, run_files
from orchard.jsonlines import read_jsonl


def _row(subject: str, run: int, elapsed: float | None = 1.5, **extra: Any) -> dict[str, Any]:
    return {"subject": subject, "scenario": "status", "operation": "status", "run": run,
            "returncode": 0, "elapsed_ms": elapsed, **extra}


def _count(rows: Sequence[Mapping[str, Any]]) -> str:
    return f"# {len(rows)} rows\n"


def test_rows_land_in_jsonl_with_a_summary_beside_them(tmp_path: Path) -> None:
    with RunWriter(tmp_path, "task-loop", summary=_count) as writer:
        writer.write(_row("git", 1))
        writer.write(_row("oak", 1, elapsed=None, note="unmeasured"))
    assert writer.path == tmp_path / "task-loop" / f"{writer.stamp}.jsonl"
    assert read_jsonl(writer.path) == [_row("git", 1), _row("oak", 1, elapsed=None, note="unmeasured")]
    assert writer.summary_path == writer.path.with_suffix(".md")
    assert writer.summary_path.read_text() == "# 2 rows\n"


def test_each_row_is_on_disk_as_soon_as_it_is_written(tmp_path: Path) -> None:
    """A crash after a row keeps that row."""
    writer = RunWriter(tmp_path, "lane")
    writer.write(_row("git", 1))
    assert read_jsonl(writer.path) == [_row("git", 1)]
    writer.close()


def test_rows_written_before_an_error_are_kept_and_indexed(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        with RunWriter(tmp_path, "lane") as writer:
            writer.write(_row("git", 1))
            raise RuntimeError("the lane crashed")
    assert read_jsonl(writer.path) == [_row("git", 1)]
    with sqlite3.connect(tmp_path / "index.db") as db:
        assert db.execute("SELECT count(*) FROM rows").fetchone() == (1,)


def test_stamps_are_never_reused_within_a_process(tmp_path: Path) -> None:
    writers = [RunWriter(tmp_path, "lane") for _ in range(200)]
    for index, writer in enumerate(writers):
        writer.write(_row("git", index))
        writer.close()
    assert len({writer.stamp for writer in writers}) == 200
    for index, writer in enumerate(writers):
        assert read_jsonl(writer.path) == [_row("git", index)]


WRITER = """
import sys
from pathlib import Path
from orchard.bench.results.store import RunWriter
results, who = Path(sys.argv[1]), sys.argv[2]
for index in range(100):
    with RunWriter(results, "lane") as writer:
        writer.write({"subject": who, "run": index})
"""


def test_concurrent_processes_never_share_a_stamp_or_overwrite_a_file(tmp_path: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), who]) for who in ("a", "b", "c")]
    assert [proc.wait(timeout=300) for proc in procs] == [0, 0, 0]
    files = run_files(tmp_path, "lane")
    assert len(files) == 300
    contents = sorted((row["subject"], row["run"]) for path in files for row in read_jsonl(path))
    assert contents == sorted((who, index) for who in "abc" for index in range(100))
    with sqlite3.connect(tmp_path / "index.db") as db:
        assert db.execute("SELECT count(DISTINCT stamp), count(*) FROM rows").fetchone() == (300, 300)


def test_an_existing_summary_is_never_overwritten(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path, "lane", summary=_count)
    writer.write(_row("git", 1))
    writer.summary_path.write_text("someone else's notes\n")
    with pytest.raises(FileExistsError):
        writer.close()
    assert writer.summary_path.read_text() == "someone else's notes\n"
    assert read_jsonl(writer.path) == [_row("git", 1)]


def test_the_index_answers_queries_with_the_whole_row(tmp_path: Path) -> None:
    with RunWriter(tmp_path, "task-loop") as first:
        first.write(_row("git", 1, elapsed=10.0))
        first.write(_row("oak", 1, elapsed=4.0, tokens=12))
    with RunWriter(tmp_path, "contention") as second:
        second.write({"subject": "git", "scenario": "push", "operation": "push", "run": 1, "elapsed_ms": 99.0})
    with sqlite3.connect(tmp_path / "index.db") as db:
        found = db.execute(
            "SELECT lane, stamp, line, subject, elapsed_ms, row FROM rows "
            "WHERE scenario = 'status' ORDER BY elapsed_ms"
        ).fetchall()
        lanes = db.execute("SELECT lane, count(*) FROM rows GROUP BY lane ORDER BY lane").fetchall()
    assert [(lane, stamp, line, subject, ms) for lane, stamp, line, subject, ms, _ in found] == [
        ("task-loop", first.stamp, 1, "oak", 4.0),
        ("task-loop", first.stamp, 0, "git", 10.0),
    ]
    assert json.loads(found[0][5]) == _row("oak", 1, elapsed=4.0, tokens=12)
    assert lanes == [("contention", 1), ("task-loop", 2)]


def test_run_files_and_latest_rows_pick_the_newest_run_of_each_lane(tmp_path: Path) -> None:
    stamps = []
    for lane, subject in (("task-loop", "old"), ("contention", "only"), ("task-loop", "new")):
        with RunWriter(tmp_path, lane) as writer:
            writer.write(_row(subject, 1))
        stamps.append(writer.stamp)
    assert [p.stem for p in run_files(tmp_path, "task-loop")] == [stamps[0], stamps[2]]
    assert len(run_files(tmp_path)) == 3
    latest = list(latest_rows(tmp_path))
    assert [(lane, [row["subject"] for row in rows]) for lane, rows in latest] == [
        ("contention", ["only"]),
        ("task-loop", ["new"]),
    ]


def test_an_empty_results_directory_has_no_latest_rows(tmp_path: Path) -> None:
    assert list(latest_rows(tmp_path / "nothing-here")) == []
    assert run_files(tmp_path) == []


def test_the_index_is_rebuilt_from_the_jsonl_files(tmp_path: Path) -> None:
    from orchard.bench.results.store import RunWriter, connect_index, rebuild_index

    for lane in ("a", "b"):
        with RunWriter(tmp_path, lane) as writer:
            writer.write({"subject": "git", "scenario": lane, "operation": "x", "returncode": 0})
    (tmp_path / "index.db").unlink()
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"index.db{suffix}").unlink(missing_ok=True)
    assert rebuild_index(tmp_path) == 2
    connection = connect_index(tmp_path)
    try:
        assert sorted(r[0] for r in connection.execute("SELECT scenario FROM rows")) == ["a", "b"]
    finally:
        connection.close()
