"""A worker's copy of the bench: the lab's bench without its held-out inputs.

A suite's held-out scenarios, fixtures and files (docs/suites.md) are run
only by the judge. The judge makes, once per bench base, its *view* of the
bench (`judge/bench-views/<base>/`): a checkout of that base with the
held-out inputs removed, turned into a one-commit repository of what a
worker may see, so no `git show` brings a held-out file back. Every worker
gets a fresh plain copy of the view (its files and its one-commit `.git`)
for every experiment; nothing is shared with the judge's copy. The view's
commit, recorded per worker under judge/ out of the worker's reach, is the
base its bench is checked against (`worker_bench_base`): the copy is not
tampering, any change to it is. The judge reads the worker's bench through
its own view (`worker_bench_source`): the worker's own `.git` is never used.

A bench whose suite holds nothing back is cloned for each worker as it is
(a marker records that, so the check is made once per base too).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from orchard import bench

if TYPE_CHECKING:
    from orchard.lab.records.worker import WorkerDir
    from orchard.lab.workers.vcs import Vcs


class ViewSource(Protocol):
    """What a view is made from: the workspace's bench, its VCS, the judge's directory (a `Workspace`)."""

    @property
    def bench_dir(self) -> Path: ...
    @property
    def judge_dir(self) -> Path: ...
    @property
    def bench_vcs(self) -> Vcs: ...
    def suite(self, bench_dir: Path) -> Path | None: ...


# Workers set up in parallel threads ask for the same view at once: it is made once.
_MAKING = threading.Lock()


def _views(ws: ViewSource) -> Path:
    return ws.judge_dir / "bench-views"


def _record(ws: ViewSource, worker: str) -> Path:
    return _views(ws) / worker


def _view_dir(ws: ViewSource, bench_base: str) -> Path:
    return _views(ws) / f"base-{bench_base}"


def _nothing_withheld(ws: ViewSource, bench_base: str) -> Path:
    return _views(ws) / f"base-{bench_base}.none"


def _view(ws: ViewSource, bench_base: str) -> Path | None:
    """The judge's view of the bench at `bench_base` (made on first use); None when nothing is held out."""
    view, none = _view_dir(ws, bench_base), _nothing_withheld(ws, bench_base)
    with _MAKING:
        if view.is_dir():
            return view
        if none.exists():
            return None
        _views(ws).mkdir(parents=True, exist_ok=True)
        making = Path(tempfile.mkdtemp(prefix=f".making-{bench_base[:12]}-", dir=_views(ws)))
        try:
            ws.bench_vcs.clone(str(ws.bench_dir), making / "bench", commit=bench_base)
            if not _withhold(ws, making / "bench"):
                none.touch()
                return None
            shutil.rmtree(making / "bench" / ".git")
            ws.bench_vcs.init(making / "bench", "orchard: the bench without its held-out inputs")
            try:
                os.rename(making / "bench", view)
            except OSError:
                if not view.is_dir():  # another process made it first: theirs is the same view
                    raise
            return view
        finally:
            shutil.rmtree(making, ignore_errors=True)


def holds_back(ws: ViewSource) -> bool:
    """Whether the lab's bench, as its clone is now, holds inputs out of the workers' copies."""
    path = ws.suite(ws.bench_dir)
    return path is not None and path.is_file() and bench.suite_holds_back(path)


def _withhold(ws: ViewSource, bench_dir: Path) -> list[str]:
    """Turn a bench clone into its copy without held-out inputs (the suite says which); the files removed."""
    path = ws.suite(bench_dir)
    return bench.withhold(path) if path is not None and path.is_file() else []


def give_bench(ws: ViewSource, worker: WorkerDir, bench_base: str) -> None:
    """Give `worker` a fresh bench at `bench_base`: a copy of the judge's view, or a clone when nothing is held out."""
    record = _record(ws, worker.name)
    record.unlink(missing_ok=True)
    view = _view(ws, bench_base)
    if view is None:
        ws.bench_vcs.clone(str(ws.bench_dir), worker.bench_dir, commit=bench_base)
        return
    shutil.copytree(view, worker.bench_dir, symlinks=True)
    record.write_text(f"{bench_base} {ws.bench_vcs.head(view)}\n", encoding="utf-8")


def worker_bench_base(ws: ViewSource, worker: str, bench_base: str) -> str:
    """The commit `worker`'s bench clone must still be at: `bench_base`, or its held-out-free copy of it."""
    try:
        base, view = _record(ws, worker).read_text(encoding="utf-8").split()
    except (OSError, ValueError):
        return bench_base
    return view if base == bench_base else bench_base


def worker_bench_source(ws: ViewSource, worker: str, bench_base: str) -> tuple[Path, str]:
    """A judge-owned repository holding `worker`'s bench base, and that base: the lab's bench, or its view."""
    base = worker_bench_base(ws, worker, bench_base)
    return (_view_dir(ws, bench_base), base) if base != bench_base else (ws.bench_dir, bench_base)
