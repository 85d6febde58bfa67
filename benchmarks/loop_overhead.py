"""The research loop's own cost: orchestrator time per experiment outside workers, builds and verdicts.

    python benchmarks/loop_overhead.py [--runs 3] [--workers 2] [--executor auto] [--out FILE]

Each run makes a fresh demo lab (`make_demo(only=...)`: patch launcher, no
model) in a temporary directory and runs `Lab.run()` to its stop, with
timers wrapped around the loop's phases from outside (nothing in orchard
is changed; a function imported by name into several modules is timed in
each). Every timer records its own time minus the timed calls inside it,
per thread, so each second of a thread lands in exactly one category.

The loop's thread and its judge and landing threads are timed alike; the
orchestrator's time is the sum over those threads of their time outside:

- waiting for workers: the loop's poll sleeps (the workers themselves run
  in other processes: their patch, build, tests and measurement are theirs);
- build and test steps: `builds.run_step` (the judge's build, target tests,
  harness tests, baseline builds);
- verdicts: `verdicts.measure` (candidate, confirmation, post-merge and
  final verdicts, their lock waits included) and the start's A/A calibration
  (`verdicts.calibrate`).

What remains is the orchestrator: fresh worker clones, clean checkouts
with the patch applied, candidate collection (diff, bench check, report),
lab.db transactions, polling the executor, rendering the notebook, the
lab's commits, pushes and merges. It is reported per judged experiment,
median over the runs, with its breakdown and the git and tmux processes
orchard started.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import libtmux

from orchard.bench.machine import machine_facts, machine_fingerprint
from orchard.demo.make import make_demo
from orchard.lab.db.state import LabState
from orchard.lab.judge import ladder as judge
from orchard.lab.judge import measuring as verdicts
from orchard.lab.loop import collection, resume, stop, sweep, worker_start
from orchard.lab.loop import lab as loop_module
from orchard.lab.loop import start as start_module
from orchard.lab.loop.lab import Lab
from orchard.lab.workers.executors.local import ProcessExecutor
from orchard.lab.workers.vcs.base import Vcs
from orchard.lab.workers.workspace import bench_view, builds
from orchard.lab.workers.workspace.workspace import Workspace

# One LAND with a merge, a KILL by the unit tests, a KILL by a quality gate,
# a KILL for a tampered bench: every judge path but the slow time-metric win.
HYPOTHESES = ("terse-report", "longest-word-one-pass", "top-ten-default", "read-whole-file")

EXCLUDED = ("waiting for workers", "build and test steps", "verdicts", "calibration")
BOOKKEEPING = "loop: poll, dispatch, lab.db reads"
# (module or class, function name, category): the orchestrator's phases.
PHASES: tuple[tuple[Any, str, str], ...] = (
    (Lab, "run", BOOKKEEPING),
    (Lab, "dispatch", BOOKKEEPING),
    (Lab, "harvest", BOOKKEEPING),
    (Lab, "preflight", "lab start"),
    (start_module, "start", "lab start"),
    (resume, "resume_workers", "lab start"),
    (ProcessExecutor, "poll", "executor: poll the workers"),
    (ProcessExecutor, "start", "executor: start a worker"),
    (stop, "stop_reason", "stop conditions"),
    (Lab, "assign", "assign: pick, pins, lab.db"),
    (worker_start, "start_worker", "worker start: prompt, lab.db"),
    (Workspace, "setup_worker", "worker start: fresh clones"),
    (bench_view, "withhold_inputs", "worker start: bench without held-out inputs"),  # main before issue14-orch
    (bench_view, "give_bench", "worker start: bench without held-out inputs"),
    (builds, "give_baseline", "worker start: copy of the baseline"),
    (builds, "baseline_binary", "baseline binary (cached, hashes checked)"),
    (collection, "collect_result", "collect: lab.db"),
    (collection, "collect_candidate", "collect: diff, bench check, report"),
    (Lab, "_judge_job", "judge thread: collection checks, lab.db"),
    (judge, "judge", "judge thread: collection checks, lab.db"),
    (builds, "checkout_with_patch", "judge: clean checkout + patch"),
    (verdicts, "assert_bench_untouched", "judge: lab's bench clone unchanged"),
    (Lab, "_decide", "decide + lab.db"),
    (Lab, "_landed", "decide + lab.db"),
    (Lab, "_land_job", "land: commit, push, merge"),
    (Lab, "render", "render notebook"),
    (sweep, "after_win", "after a win: opportunities, sweep"),
    (Lab, "finish", "final report"),
)
EXCLUSIONS: tuple[tuple[Any, str, str], ...] = (
    (builds, "run_step", "build and test steps"),
    (verdicts, "measure", "verdicts"),
    (verdicts, "calibrate", "calibration"),
)


class Profile:
    """Self time per category, per thread: a timed call's time minus the timed calls inside it."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: Counter[str] = Counter()
        self._local = threading.local()
        self._lock = threading.Lock()
        self._restore: list[tuple[Any, str, Any]] = []

    def _stack(self) -> list[float]:
        stack: list[float] | None = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def timed(self, category: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            stack = self._stack()
            stack.append(0.0)
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - start
                inside = stack.pop()
                with self._lock:
                    self.seconds[category] += elapsed - inside
                    self.calls[category] += 1
                if stack:
                    stack[-1] += elapsed

        return wrapper

    def counted(self, category: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.calls[category] += 1
            return function(*args, **kwargs)

        return wrapper

    def _replace(self, owner: Any, name: str, wrapped: Callable[..., Any]) -> None:
        """Put `wrapped` in place of `owner.name`, and of every orchard module's name for the same function."""
        original = getattr(owner, name)
        owners = [owner]
        if not isinstance(owner, type):
            owners += [m for key, m in list(sys.modules.items())
                       if key.startswith("orchard.") and m is not owner and vars(m).get(name) is original]
        for where in owners:
            self._restore.append((where, name, vars(where)[name]))
            setattr(where, name, wrapped)

    def wrap(self, owner: Any, name: str, category: str) -> None:
        if hasattr(owner, name):  # a phase an older orchard does not have is simply not timed
            self._replace(owner, name, self.timed(category, getattr(owner, name)))

    def count(self, owner: Any, name: str, category: str) -> None:
        self._replace(owner, name, self.counted(category, getattr(owner, name)))

    def restore(self) -> None:
        for owner, name, original in reversed(self._restore):
            setattr(owner, name, original)
        self._restore.clear()


class _TimedClock:
    """The loop's `time` module, with its poll sleep timed."""

    def __init__(self, profile: Profile) -> None:
        self.sleep = profile.timed("waiting for workers", time.sleep)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@contextmanager
def instrumented(profile: Profile) -> Iterator[None]:
    """Timers around the loop's phases and around what is not the orchestrator's."""
    for owner, name, category in (*EXCLUSIONS, *PHASES):
        profile.wrap(owner, name, category)
    profile.count(Vcs, "_run", "git processes")
    profile.count(libtmux.Server, "cmd", "tmux processes")
    clock = loop_module.time
    loop_module.time = _TimedClock(profile)  # type: ignore[assignment]
    try:
        yield
    finally:
        loop_module.time = clock
        profile.restore()


def one_run(root: Path, hypotheses: Sequence[str], workers: int, executor: str) -> dict[str, Any]:
    ws = make_demo(root / "demo", workers=workers, executor=executor, only=list(hypotheses))
    state = LabState.open(ws.root)
    profile = Profile()
    load, at = os.getloadavg(), datetime.now(UTC)
    try:
        with instrumented(profile):
            started = time.perf_counter()
            reason = Lab(ws, state, say=lambda _: None).run()
            wall = time.perf_counter() - started
        experiments = state.experiments()
        decisions = Counter(e.decision for e in experiments)
    finally:
        state.close()
    orchestrator = sum(seconds for category, seconds in profile.seconds.items() if category not in EXCLUDED)
    return {"wall_s": wall, "orchestrator_s": orchestrator, "experiments": len(experiments),
            "decisions": dict(decisions), "reason": reason, "seconds": dict(profile.seconds),
            "calls": dict(profile.calls), "load": load, "started_at": at.isoformat(),
            "ended_at": datetime.now(UTC).isoformat()}


def spread(values: Sequence[float], scale: float = 1000.0) -> str:
    return f"{statistics.median(values) * scale:.0f} ({min(values) * scale:.0f}-{max(values) * scale:.0f})"


def report(runs: list[dict[str, Any]], hypotheses: Sequence[str], workers: int, executor: str,
           command: str, label: str) -> str:
    facts = machine_facts()
    started = min(datetime.fromisoformat(r["started_at"]) for r in runs)
    ended = max(datetime.fromisoformat(r["ended_at"]) for r in runs)
    per = lambda run, key: run[key] / run["experiments"]  # noqa: E731
    outcomes = Counter(", ".join(f"{n} {d}" for d, n in sorted(r["decisions"].items())) for r in runs)
    lines = [
        f"# Research loop: orchestrator overhead ({label})",
        "",
        f"Measured {started:%Y-%m-%d %H:%M}-{ended:%H:%M} UTC on {facts.describe()} "
        f"(fingerprint `{machine_fingerprint()}`, `nproc` {os.cpu_count()}). {len(runs)} "
        f"run{'s' if len(runs) != 1 else ''} of `{command}`; load average (1, 5, 15 min) at each run's start: "
        + "; ".join(", ".join(f"{v:.2f}" for v in r["load"]) for r in runs) + ".",
        "",
        f"Each run: a fresh demo lab (`make_demo(only=[{', '.join(hypotheses)}])`), {workers} workers, executor "
        f"`{executor}`, patch launcher, `Lab.run()` until it stops. Decisions: "
        + "; ".join(f"{outcome} in {count} of {len(runs)} runs" for outcome, count in outcomes.most_common()) + ".",
        "",
        "| per judged experiment | median ms (min-max) over runs |",
        "|---|---:|",
        f"| **orchestrator** (loop, judge and landing threads) | "
        f"**{spread([per(r, 'orchestrator_s') for r in runs])}** |",
        f"| whole run (wall) | {spread([per(r, 'wall_s') for r in runs])} |",
    ]
    for category in EXCLUDED:
        per_experiment = [r["seconds"].get(category, 0.0) / r["experiments"] for r in runs]
        lines.append(f"| excluded: {category} | {spread(per_experiment)} |")
    for counter in ("git processes", "tmux processes"):
        per_experiment = [r["calls"].get(counter, 0) / r["experiments"] for r in runs]
        lines.append(f"| {counter} started by orchard | {spread(per_experiment, 1.0)} |")
    lines += [
        "",
        "Where the orchestrator's time goes (self time, per judged experiment; calls per run):",
        "",
        "| phase | median ms (min-max) | calls per run |",
        "|---|---:|---:|",
    ]
    categories = sorted(
        {c for r in runs for c in r["seconds"] if c not in EXCLUDED},
        key=lambda c: -statistics.median([r["seconds"].get(c, 0.0) for r in runs]),
    )
    for category in categories:
        values = [r["seconds"].get(category, 0.0) / r["experiments"] for r in runs]
        calls = statistics.median([r["calls"].get(category, 0) for r in runs])
        lines.append(f"| {category} | {spread(values)} | {calls:g} |")
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--executor", choices=("auto", "tmux", "subprocess"), default="auto")
    parser.add_argument("--hypotheses", default=",".join(HYPOTHESES), help="demo hypothesis ids, comma-separated")
    parser.add_argument("--label", default="this checkout", help="what code was measured, for the heading")
    parser.add_argument("--out", type=Path, default=None, help="also write the Markdown here")
    parser.add_argument("--json", type=Path, default=None,
                        help="also append each run here (one JSON line), e.g. to interleave two checkouts' runs")
    parser.add_argument("--report-from", type=Path, default=None,
                        help="run nothing: report the runs a --json file holds")
    args = parser.parse_args()
    hypotheses = [h for h in args.hypotheses.split(",") if h]
    command = (
        f"python benchmarks/loop_overhead.py --runs {args.runs} --workers {args.workers} --executor {args.executor}"
    )
    if args.report_from is not None:
        saved = [json.loads(line) for line in args.report_from.read_text().splitlines() if line.strip()]
        print(report(saved, hypotheses, args.workers, args.executor, command, args.label))
        return
    runs = []
    cache = Path(tempfile.mkdtemp(prefix="orchard-loop-overhead-cache-"))
    previous_cache = os.environ.get("ORCHARD_CACHE_DIR")
    os.environ["ORCHARD_CACHE_DIR"] = str(cache)  # calibrations of this benchmark stay out of the user's cache
    try:
        for index in range(args.runs):
            root = Path(tempfile.mkdtemp(prefix="orchard-loop-overhead-"))
            try:
                run = one_run(root, hypotheses, args.workers, args.executor)
            finally:
                shutil.rmtree(root, ignore_errors=True)
            runs.append(run)
            if args.json is not None:
                with args.json.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(run) + "\n")
            print(
                f"run {index + 1}/{args.runs}: {run['experiments']} experiments, wall {run['wall_s']:.1f} s, "
                f"orchestrator {run['orchestrator_s']:.2f} s ({run['decisions']}; stopped: {run['reason']}; "
                f"load {run['load'][0]:.2f})",
                flush=True,
            )
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        if previous_cache is None:
            os.environ.pop("ORCHARD_CACHE_DIR", None)
        else:
            os.environ["ORCHARD_CACHE_DIR"] = previous_cache
    text = report(runs, hypotheses, args.workers, args.executor, command, args.label)
    print(text)
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
