"""A worker's copy of the bench: the lab's bench without its held-out inputs.

A suite's held-out scenarios, fixtures and files (docs/suites.md) are run
only by the judge. A worker's bench clone becomes a one-commit repository of
what it may see, so no `git show` brings a held-out file back, and that
commit is recorded under judge/, out of the worker's reach, as the base its
bench is checked against (`worker_bench_base`): the copy is not tampering,
any change to it is. The judge keeps its own copy of that one-commit
repository (`judge/bench-views/<worker>.git`), made before the worker
starts, to read the worker's bench through (`worker_bench_source`): the
worker's own `.git` is never used.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchard.lab.workspace import Worker, Workspace


def _record(ws: Workspace, worker: str) -> Path:
    return ws.judge_dir / "bench-views" / worker


def _view_repository(ws: Workspace, worker: str) -> Path:
    return ws.judge_dir / "bench-views" / f"{worker}.git"


def withhold_inputs(ws: Workspace, worker: Worker, bench_base: str) -> None:
    """Take the held-out inputs out of `worker`'s fresh bench clone (at `bench_base`), history included."""
    from orchard.lab.verdicts import withhold  # the one lab module that reads suites; it imports workspace

    record = _record(ws, worker.name)
    record.unlink(missing_ok=True)
    shutil.rmtree(_view_repository(ws, worker.name), ignore_errors=True)
    if not withhold(ws, worker.bench_dir):
        return
    shutil.rmtree(worker.bench_dir / ".git")
    view = ws.bench_vcs.init(worker.bench_dir, "orchard: the bench without its held-out inputs")
    record.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(worker.bench_dir / ".git", _view_repository(ws, worker.name))
    record.write_text(f"{bench_base} {view}\n", encoding="utf-8")


def worker_bench_base(ws: Workspace, worker: str, bench_base: str) -> str:
    """The commit `worker`'s bench clone must still be at: `bench_base`, or its held-out-free copy of it."""
    try:
        base, view = _record(ws, worker).read_text(encoding="utf-8").split()
    except (OSError, ValueError):
        return bench_base
    return view if base == bench_base else bench_base


def worker_bench_source(ws: Workspace, worker: str, bench_base: str) -> tuple[Path, str]:
    """A judge-owned repository holding `worker`'s bench base, and that base: the lab's bench, or its view."""
    base = worker_bench_base(ws, worker, bench_base)
    return (_view_repository(ws, worker), base) if base != bench_base else (ws.bench_dir, bench_base)
