"""How long setting up workers takes on a large repository: 1 worker versus 8.

Generates a git repository of 20,000 files (in a temporary directory),
creates a workspace for it, then times `Workspace.setup_workers` for 1 and
for 8 fresh workers, several runs each (workers removed between runs), and
prints the medians, the 8-vs-1 ratio and the disk each worker's objects
cost; then the same for recycling those workers after an experiment (what
the lab does between experiments). Writes the figures to docs/benchmarks-workspace.md with the machine.

    .venv/bin/python benchmarks/workspace_setup.py [--files 20000] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from orchard.bench.machine import machine_facts
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.lab.workers.workspace.workspace_init import init_workspace

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks-workspace.md"


def make_repo(path: Path, files: int) -> None:
    path.mkdir()
    for index in range(files):
        sub = path / f"pkg{index % 100:02d}" / f"mod{index % 7}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"file{index:05d}.txt").write_text(f"line one of {index}\n" * 20)
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b"}
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"], ["git", "commit", "-qm", "big"]):
        subprocess.run(argv, cwd=path, check=True, env=env)


def time_setup(workspace: Workspace, count: int, runs: int) -> tuple[list[float], list[float]]:
    """Seconds to set up `count` fresh workers, and to recycle them after an experiment."""
    fresh, recycled = [], []
    for run in range(runs):
        names = [f"r{run}w{i}" for i in range(count)]
        started = time.perf_counter()
        checkouts = workspace.setup_workers(names)
        fresh.append(time.perf_counter() - started)
        for checkout in checkouts:  # what an experiment leaves behind
            (checkout.worker.target_dir / "pkg00" / "mod0" / "file00000.txt").write_text("edited\n")
            (checkout.worker.target_dir / "new-file.txt").write_text("new\n")
        started = time.perf_counter()
        workspace.setup_workers(names)
        recycled.append(time.perf_counter() - started)
        for name in names:
            workspace.remove_worker(name)
    return fresh, recycled


def object_bytes(checkout: Path) -> int:
    """Bytes of the clone's object store not shared by hard links with another file."""
    total = 0
    for path in (checkout / ".git" / "objects").rglob("*"):
        if path.is_file() and path.stat().st_nlink == 1:
            total += path.stat().st_size
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    scratch = Path(tempfile.mkdtemp(prefix="orchard-bench-ws-"))
    try:
        make_repo(scratch / "target", args.files)
        workspace = init_workspace(scratch / "ws", str(scratch / "target"))
        time_setup(workspace, 1, 1)  # warm-up: page cache, git's own caches
        one, one_again = time_setup(workspace, 1, args.runs)
        eight, eight_again = time_setup(workspace, 8, args.runs)
        probe = workspace.setup_worker("probe").worker.target_dir
        unshared = object_bytes(probe)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    load_after = os.getloadavg()[0]
    m1, m8 = statistics.median(one), statistics.median(eight)
    r1, r8 = statistics.median(one_again), statistics.median(eight_again)
    facts = machine_facts()

    def runs(values: list[float]) -> str:
        return ", ".join(f"{value:.2f}" for value in values)

    lines = [
        "# Workspace setup: 1 worker versus 8",
        "",
        "`benchmarks/workspace_setup.py`: `Workspace.setup_workers` on a generated git",
        f"repository of {args.files:,} files, {args.runs} runs each after one warm-up, workers",
        "removed between runs. Each worker gets a target clone (the one pack of the lab's",
        "reference clone hard-linked, the working files written) and a bench clone; workers",
        "are set up in parallel threads.",
        "",
        "| workers | fresh: median (s) | fresh: runs (s) | recycled: median (s) | recycled: runs (s) |",
        "| --- | --- | --- | --- | --- |",
        f"| 1 | {m1:.2f} | {runs(one)} | {r1:.2f} | {runs(one_again)} |",
        f"| 8 | {m8:.2f} | {runs(eight)} | {r8:.2f} | {runs(eight_again)} |",
        "",
        f"Ratio 8 / 1, fresh workers: **{m8 / m1:.2f}x** for 8x the workers ({m8 / 8:.2f} s per worker at 8);",
        f"recycled workers (reset after an experiment, the usual case in a lab): **{r8 / r1:.2f}x**.",
        f"Object bytes a worker's target clone does not share with the reference clone: {unshared:,}.",
        "The remaining cost is writing each worker's working files: the object store is",
        "shared, the checkout is not (an edit in one worker must never reach another).",
        "",
        f"Machine: {facts.describe()}; shared with other work (1-minute load average "
        f"{load_before:.1f} at the start, {load_after:.1f} at the end), so expect noise.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    DOC.parent.mkdir(exist_ok=True)
    DOC.write_text(text)


if __name__ == "__main__":
    main()
