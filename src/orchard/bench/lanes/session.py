"""One lane run: the lock, the row writer, the temporary workdir, the outcome.

Every lane holds the machine-wide measurement lock for its whole run, writes
its rows through one `RunWriter`, and works in one temporary directory that
is removed on the way out (also on Ctrl-C or failure) unless the user asked
to keep it.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from orchard.bench import rows
from orchard.bench.environment import isolated_env
from orchard.bench.lanes.steps import LaneContext
from orchard.bench.lanes.transport import LoopbackServers, harness_git
from orchard.bench.lock import MeasurementLock
from orchard.bench.store import RunWriter, Summary
from orchard.errors import UsageError


@dataclass
class LaneResult:
    path: Path
    summary_path: Path
    rows: list[dict[str, Any]]
    workdir: Path | None  # kept workspaces, when asked to keep them

    @property
    def failed(self) -> bool:
        return bool(rows.failures(self.rows))


@dataclass
class LaneSession:
    lock: MeasurementLock
    writer: RunWriter
    root: Path
    keep: bool

    def result(self) -> LaneResult:
        kept = self.root if self.keep else None
        return LaneResult(self.writer.path, self.writer.summary_path, self.writer.rows, kept)


def check_common(runs: int, subjects: Sequence[object]) -> None:
    if runs < 1:
        raise UsageError(f"--runs must be at least 1, not {runs}")
    if not subjects:
        raise UsageError("no subjects to measure")


@contextmanager
def lane_session(
    lane: str,
    results: Path,
    summary: Summary,
    *,
    keep: bool,
    parent: Path | None,
    out: TextIO,
) -> Iterator[LaneSession]:
    """Lock, writer and workdir for one run; cleans the workdir up whatever happens."""
    with MeasurementLock(lane, out=out) as lock, RunWriter(results, lane, summary=summary) as writer:
        root = Path(tempfile.mkdtemp(prefix=f"orchard-{lane}-", dir=parent))
        try:
            yield LaneSession(lock, writer, root, keep)
        finally:
            if keep:
                print(f"[workdirs] kept {root}", file=out, flush=True)
            else:
                shutil.rmtree(root, ignore_errors=True)
    lock.print_total()
    print(f"[result] {writer.path}", file=out, flush=True)
    print(f"[summary] {writer.summary_path}", file=out, flush=True)


@contextmanager
def lane_context(
    lane: str,
    results: Path,
    summary: Summary,
    *,
    keep: bool,
    parent: Path | None,
    out: TextIO,
    step_timeout_s: float,
    admitted_chars: int,
    metadata: dict[str, Any],
) -> Iterator[tuple[LaneSession, LaneContext]]:
    """A lane session plus what its scenarios share: pinned env, harness git, owned servers."""
    git = harness_git()
    env = isolated_env()
    with (
        lane_session(lane, results, summary, keep=keep, parent=parent, out=out) as session,
        LoopbackServers(git, session.root, env) as servers,
    ):
        yield session, LaneContext(
            bench_id=session.writer.stamp,
            root=session.root,
            env=env,
            metadata={"lane": lane, "bench_id": session.writer.stamp, **metadata, **session.lock.metadata()},
            servers=servers,
            sink=session.writer.write,
            step_timeout_s=step_timeout_s,
            admitted_chars=admitted_chars,
            git=git,
        )
