"""Reading a worker's checkouts without trusting them, on whichever host they are.

A worker's checkouts are foreign: they are never read with their own VCS
configuration. Each is read through a fresh judge-owned repository holding its base
(`judge/collect-<experiment>/`), whose repository looks at the worker's
files (`Vcs.foreign_changes`); nothing in the worker's `.git` runs or counts.
The lab runs this for its own workers; a dask worker runs the same function
on its host when its experiment ends (`remote.run_experiment`), so both read
a checkout the same way.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from orchard.lab.records.experiment import Experiment
from orchard.lab.records.worker import BASELINE_COPY, REPORT_NAME
from orchard.lab.records.worker_output import CheckoutReading
from orchard.lab.workers.launchers.launcher_base import Launcher
from orchard.lab.workers.vcs import Changes, Vcs
from orchard.lab.workers.workspace import special_files
from orchard.lab.workers.workspace.bench_view import worker_bench_source
from orchard.lab.workers.workspace.workspace import Workspace


def _foreign(vcs: Vcs, source: Path, work_tree: Path, base: str, clean: Path, ignore: Sequence[str], *,
             patch: bool = True) -> Changes:
    """A worker's checkout read through a fresh repository of ours holding `base` (`patch=False`: names only)."""
    if clean.exists():
        shutil.rmtree(clean)
    clean.parent.mkdir(parents=True, exist_ok=True)
    vcs.reader_clone(str(source), clean, base)
    vcs.ignore_locally(clean, ignore)
    return vcs.foreign_changes(clean, work_tree, base, ignore, patch=patch)


def never_the_change(workspace: Workspace, launcher: Launcher) -> list[str]:
    """What a checkout holds that is never the change: the report, the baseline copy, `[target] ignore` (build
    outputs), the agent CLI's scratch files. Gitignore-style globs."""
    return [f"/{REPORT_NAME}", f"/{BASELINE_COPY}/", *workspace.config.target.ignore, *launcher.scratch]


def read_checkout(workspace: Workspace, experiment: Experiment, ignore: Sequence[str]) -> CheckoutReading:
    """What the worker's target checkout holds beyond its base (less `ignore`), and whether its bench moved."""
    checkout = experiment.checkout
    worker = checkout.worker
    clean = workspace.judge_dir / f"collect-{experiment.name}"
    try:
        target = _foreign(workspace.target_vcs, workspace.reference_target, worker.target_dir,
                          checkout.target_base, clean / "target", ignore)
        special = special_files.in_tree(workspace.target_vcs, clean / "target", worker.target_dir)
        bench_source, bench_base = worker_bench_source(workspace, worker.name, checkout.bench_base)
        # any file changed in the bench is tampering: its names are all that counts, no patch is made
        bench = _foreign(workspace.bench_vcs, bench_source, worker.bench_dir, bench_base, clean / "bench", [],
                         patch=False)
    finally:
        shutil.rmtree(clean, ignore_errors=True)
    special += [f"{d.name}/: the checkout itself was replaced by a symlink to {d.resolve()}"
                for d in (worker.target_dir, worker.bench_dir) if d.is_symlink()]  # another worker's, perhaps
    return CheckoutReading(target_head=target.head, patch=target.patch, special_files=tuple(special),
                           bench_files=tuple(bench.files), bench_head=bench.head, bench_base=bench_base)
