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
from typing import Any, Protocol, TextIO

from orchard.bench.lanes.steps import LaneContext
from orchard.bench.lanes.transport import LoopbackServers, harness_git
from orchard.bench.lock import MeasurementLock
from orchard.bench.measuring import rows
from orchard.bench.results.store import RunWriter, Summary
from orchard.bench.sandbox.environment import isolated_env
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


class LaneOptions(Protocol):
    """What every lane's options give the session."""

    results: Path
    keep_workdirs: bool
    workdir: Path | None  # parent of the run's temporary directory
    step_timeout_s: float


@contextmanager
def lane_context(
    lane: str,
    options: LaneOptions,
    summary: Summary,
    out: TextIO,
    *,
    admitted_chars: int,
    metadata: dict[str, Any],
) -> Iterator[tuple[LaneSession, LaneContext]]:
    """Lock, writer, workdir and what a lane's scenarios share (pinned env, harness git, owned servers).

    The workdir is removed whatever happens, unless the options keep it.
    """
    git = harness_git()
    env = isolated_env()
    keep = options.keep_workdirs
    with MeasurementLock(lane, out=out) as lock, RunWriter(options.results, lane, summary=summary) as writer:
        root = Path(tempfile.mkdtemp(prefix=f"orchard-{lane}-", dir=options.workdir))
        try:
            with LoopbackServers(git, root, env) as servers:
                yield LaneSession(lock, writer, root, keep), LaneContext(
                    bench_id=writer.stamp,
                    root=root,
                    env=env,
                    metadata={"lane": lane, "bench_id": writer.stamp, **metadata, **lock.metadata()},
                    servers=servers,
                    sink=writer.write,
                    step_timeout_s=options.step_timeout_s,
                    admitted_chars=admitted_chars,
                    git=git,
                )
        finally:
            if keep:
                print(f"[workdirs] kept {root}", file=out, flush=True)
            else:
                shutil.rmtree(root, ignore_errors=True)
    lock.print_total()
    print(f"[result] {writer.path}", file=out, flush=True)
    print(f"[summary] {writer.summary_path}", file=out, flush=True)
