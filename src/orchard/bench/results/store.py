"""Where rows go: append-only JSONL, a Markdown summary, an SQLite index.

Each run of a lane writes `results/<lane>/<stamp>.jsonl` (one row per line,
flushed as it is measured, so a crash keeps everything up to it) and
`<stamp>.md` beside it. A stamp is never reused: files are opened with
exclusive creation. `results/index.db` indexes every row for queries; it can
always be rebuilt from the JSONL files, which remain the record. Writers of
one results directory take turns on `index.db.lock`: SQLite answers "database
is locked" at once, without waiting, when two connections both upgrade their
locks (first opens switching a new file to WAL), which concurrent writers on
a loaded machine met.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from filelock import FileLock

from orchard.errors import UsageError
from orchard.jsonlines import read_jsonl

Summary = Callable[[Sequence[Mapping[str, Any]]], str]

_INDEX_SCHEMA = """
CREATE TABLE IF NOT EXISTS rows (
    lane TEXT NOT NULL,
    stamp TEXT NOT NULL,
    line INTEGER NOT NULL,
    subject TEXT,
    scenario TEXT,
    operation TEXT,
    run INTEGER,
    returncode INTEGER,
    elapsed_ms REAL,
    row TEXT NOT NULL,
    PRIMARY KEY (lane, stamp, line)
);
CREATE INDEX IF NOT EXISTS rows_by_scenario ON rows (scenario, operation, subject);
"""


def new_stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")


def connect_index(results: Path) -> sqlite3.Connection:
    results.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(results / "index.db", timeout=30)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.executescript(_INDEX_SCHEMA)
    return connection


class RunWriter:
    """Writes the rows of one lane run. Use as a context manager."""

    def __init__(self, results: Path, lane: str, summary: Summary | None = None) -> None:
        self.results = Path(results)
        self.lane = lane
        self.summary = summary
        directory = self.results / lane
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except (NotADirectoryError, FileExistsError):
            raise UsageError(f"--results {self.results}: not a directory (a file is in the way)") from None
        except PermissionError:
            raise UsageError(f"--results {self.results}: not writable") from None
        self.interrupted = False  # set when Ctrl-C ended the run: the summary says so
        while True:
            self.stamp = new_stamp()
            self.path = directory / f"{self.stamp}.jsonl"
            try:
                self._file = open(self.path, "x", encoding="utf-8")
                break
            except FileExistsError:
                continue
        self.rows: list[dict[str, Any]] = []

    @property
    def summary_path(self) -> Path:
        return self.path.with_suffix(".md")

    def write(self, row: Mapping[str, Any]) -> None:
        data = dict(row)
        self._file.write(json.dumps(data, sort_keys=True, default=str) + "\n")
        self._file.flush()
        self.rows.append(data)

    def close(self) -> None:
        if self._file.closed:
            return
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        if self.summary is not None:
            with open(self.summary_path, "x", encoding="utf-8") as handle:
                if self.interrupted:
                    handle.write(f"**Interrupted** (Ctrl-C) after {len(self.rows)} rows: this summary "
                                 "covers only what was measured before; no verdict was reached.\n\n")
                handle.write(self.summary(self.rows))
        _index(self.results, self.lane, self.stamp, self.rows)

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt) and not self._file.closed:
            self.interrupted = True
            self.write({"lane": self.lane, "step_kind": "interrupted", "rows_before": len(self.rows),
                        "reason": "interrupted (Ctrl-C) before the run finished"})
        self.close()


def _index(results: Path, lane: str, stamp: str, rows: Sequence[Mapping[str, Any]]) -> None:
    results.mkdir(parents=True, exist_ok=True)
    with FileLock(results / "index.db.lock"):
        connection = connect_index(results)
        _insert(connection, lane, stamp, rows)


def _insert(connection: sqlite3.Connection, lane: str, stamp: str, rows: Sequence[Mapping[str, Any]]) -> None:
    try:
        with connection:
            connection.executemany(
                "INSERT OR IGNORE INTO rows VALUES (?,?,?,?,?,?,?,?,?,?)",
                [
                    (lane, stamp, line, row.get("subject"), row.get("scenario"), row.get("operation"),
                     row.get("run"), row.get("returncode"), row.get("elapsed_ms"),
                     json.dumps(row, sort_keys=True, default=str))
                    for line, row in enumerate(rows)
                ],
            )
    finally:
        connection.close()


def rebuild_index(results: Path) -> int:
    """Index every JSONL run file again (the files are the record); returns the rows indexed."""
    count = 0
    for path in run_files(results):
        rows = read_jsonl(path)
        _index(Path(results), path.parent.name, path.stem, rows)
        count += len(rows)
    return count


def run_files(results: Path, lane: str | None = None) -> list[Path]:
    """Every JSONL run file under `results` (of one lane if given), oldest first."""
    pattern = f"{lane}/*.jsonl" if lane else "*/*.jsonl"
    return sorted(Path(results).glob(pattern), key=lambda p: p.name)


def latest_rows(results: Path) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """The newest run of each lane: (lane, rows)."""
    newest: dict[str, Path] = {}
    for path in run_files(results):
        newest[path.parent.name] = path
    for lane, path in sorted(newest.items()):
        yield lane, read_jsonl(path)
