"""A worker's copy of the bench: the lab's bench without its held-out inputs.

A suite's held-out scenarios, fixtures and files (docs/suites.md) are run
only by the judge. A worker's bench clone becomes a one-commit repository of
what it may see, so no `git show` brings a held-out file back, and that
commit is recorded under judge/, out of the worker's reach, as the base its
bench is checked against (`worker_bench_base`): the copy is not tampering,
any change to it is.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchard.lab.workspace import Worker, Workspace


def _record(ws: Workspace, worker: str) -> Path:
    return ws.judge_dir / "bench-views" / worker


def withhold_inputs(ws: Workspace, worker: Worker, bench_base: str) -> None:
    """Take the held-out inputs out of `worker`'s fresh bench clone (at `bench_base`), history included."""
    from orchard.lab.verdicts import withhold  # the one lab module that reads suites; it imports workspace

    record = _record(ws, worker.name)
    record.unlink(missing_ok=True)
    if not withhold(ws, worker.bench_dir):
        return
    shutil.rmtree(worker.bench_dir / ".git")
    view = ws.bench_vcs.init(worker.bench_dir, "orchard: the bench without its held-out inputs")
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(f"{bench_base} {view}\n", encoding="utf-8")


def worker_bench_base(ws: Workspace, worker: str, bench_base: str) -> str:
    """The commit `worker`'s bench clone must still be at: `bench_base`, or its held-out-free copy of it."""
    try:
        base, view = _record(ws, worker).read_text(encoding="utf-8").split()
    except (OSError, ValueError):
        return bench_base
    return view if base == bench_base else bench_base
