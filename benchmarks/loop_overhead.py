"""The research loop's own cost: orchestrator time per experiment outside workers, builds and verdicts.

    python benchmarks/loop_overhead.py [--runs 3] [--workers 2] [--executor auto] [--out docs/benchmarks-loop.md]

Each run makes a fresh demo lab (`make_demo(only=...)`: patch launcher, no
model) in a temporary directory and runs `Lab.run()` to its stop, with
timers wrapped around the loop's phases from outside (nothing in orchard
is changed). Every timer records its own time minus the timed calls inside
it, so each second lands in exactly one category. Excluded from the
orchestrator's time:

- waiting for workers: the loop's poll sleeps (the workers themselves run
  in other processes: their patch, build, tests and measurement are theirs);
- build and test steps: `judge.run_step` (the judge's build, target tests,
  harness tests, baseline builds);
- verdicts: `judge.measure` (candidate, confirmation and post-merge
  verdicts, their lock waits included) and the start's A/A calibration.

What remains is the orchestrator: clean checkouts with the patch applied,
worker checkout resets, candidate collection (diff, bench check, report),
lab.db transactions, rendering the notebook, the lab's commits, pushes and
merges, and the executor's bookkeeping. It is reported per judged
experiment, median over the runs, with its breakdown.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchard import bench
from orchard.bench.machine import machine_facts, machine_fingerprint
from orchard.demo.lab import make_demo
from orchard.lab import judge as judging
from orchard.lab import loop as loop_module
from orchard.lab.loop import Lab
from orchard.lab.state import LabState
from orchard.lab.workspace import Workspace

# One LAND with a merge, a KILL by the unit tests, a KILL by a quality gate,
# a KILL for a tampered bench: every judge path but the slow time-metric win.
HYPOTHESES = ("terse-report", "longest-word-one-pass", "top-ten-default", "read-whole-file")

EXCLUDED = ("waiting for workers", "build and test steps", "verdicts", "calibration")


class Profile:
    """Self time per category: a timed call's time minus the timed calls inside it."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: Counter[str] = Counter()
        self._children: list[float] = []
        self._restore: list[tuple[Any, str, Any]] = []

    def timed(self, category: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self._children.append(0.0)
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - start
                inside = self._children.pop()
                self.seconds[category] += elapsed - inside
                self.calls[category] += 1
                if self._children:
                    self._children[-1] += elapsed

        return wrapper

    def wrap(self, owner: Any, name: str, category: str) -> None:
        original = getattr(owner, name)
        self._restore.append((owner, name, original))
        setattr(owner, name, self.timed(category, original))

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
    profile.wrap(judging, "run_step", "build and test steps")
    profile.wrap(judging, "measure", "verdicts")
    profile.wrap(bench, "calibrate", "calibration")
    profile.wrap(judging, "judge", "judge: clean checkout + patch")
    profile.wrap(judging, "baseline_binary", "baseline checkout (cached by commit)")
    profile.wrap(loop_module, "collect_candidate", "collect: diff, bench check, report")
    profile.wrap(Workspace, "setup_worker", "worker checkout reset")
    for name, category in (("run", "loop bookkeeping (lab.db, executor)"), ("start", "lab start"),
                           ("assign", "assign + launch"), ("collect", "loop bookkeeping (lab.db, executor)"),
                           ("resume_workers", "loop bookkeeping (lab.db, executor)"),
                           ("judge_next", "loop bookkeeping (lab.db, executor)"), ("_decide", "decide + lab.db"),
                           ("_land", "land: commit, push, merge"), ("_after_win", "after a win: opportunities, sweep"),
                           ("render", "render notebook"), ("finish", "final report"),
                           ("stop_reason", "stop conditions")):
        profile.wrap(Lab, name, category)
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
    try:
        with instrumented(profile):
            started = time.perf_counter()
            reason = Lab(ws, state, say=lambda _: None).run()
            wall = time.perf_counter() - started
        experiments = state.experiments()
        decisions = Counter(e.decision for e in experiments)
    finally:
        state.close()
    excluded = sum(profile.seconds[c] for c in EXCLUDED)
    return {"wall_s": wall, "orchestrator_s": wall - excluded, "experiments": len(experiments),
            "decisions": dict(decisions), "reason": reason, "seconds": dict(profile.seconds),
            "calls": dict(profile.calls)}


def spread(values: Sequence[float], scale: float = 1000.0) -> str:
    return f"{statistics.median(values) * scale:.0f} ({min(values) * scale:.0f}-{max(values) * scale:.0f})"


def report(runs: list[dict[str, Any]], hypotheses: Sequence[str], workers: int, executor: str,
           load: tuple[tuple[float, ...], tuple[float, ...]], command: str, started: datetime) -> str:
    facts = machine_facts()
    per = lambda run, key: run[key] / run["experiments"]  # noqa: E731
    outcomes = Counter(", ".join(f"{n} {d}" for d, n in sorted(r["decisions"].items())) for r in runs)
    share = statistics.median(r["orchestrator_s"] / r["wall_s"] for r in runs)
    lines = [
        "# Research loop: orchestrator overhead",
        "",
        f"Measured {started:%Y-%m-%d %H:%M}-{datetime.now(UTC):%H:%M} UTC on {facts.describe()} "
        f"(fingerprint `{machine_fingerprint()}`). {len(runs)} run{'s' if len(runs) != 1 else ''} "
        f"of `{command}`.",
        "",
        f"Each run: a fresh demo lab (`make_demo(only=[{', '.join(hypotheses)}])`), {workers} workers, executor "
        f"`{executor}`, patch launcher, `Lab.run()` until it stops. Decisions: "
        + "; ".join(f"{outcome} in {count} of {len(runs)} runs" for outcome, count in outcomes.most_common()) + ".",
        "",
        "**Orchestrator time** is the run's wall time minus the time spent waiting for workers (the loop's "
        "poll sleeps), in build and test steps (`judge.run_step`), in verdicts (`judge.measure`, lock waits "
        "included) and in the start's A/A calibration. It is what orchard itself adds to every experiment: "
        f"a median {share:.1%} of the run's wall time here.",
        "",
        "| per judged experiment | median ms (min-max) over runs |",
        "|---|---:|",
        f"| **orchestrator** | **{spread([per(r, 'orchestrator_s') for r in runs])}** |",
        f"| whole run (wall) | {spread([per(r, 'wall_s') for r in runs])} |",
    ]
    for category in EXCLUDED:
        per_experiment = [r["seconds"].get(category, 0.0) / r["experiments"] for r in runs]
        lines.append(f"| excluded: {category} | {spread(per_experiment)} |")
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
    lines += [
        "",
        f"Load average (1, 5, 15 min) at the start: {', '.join(f'{v:.2f}' for v in load[0])}; at the end: "
        f"{', '.join(f'{v:.2f}' for v in load[1])}. The machine is shared: other engineers' tests, demos and "
        "benchmarks ran at the same time, so these wall-clock figures include waiting for the CPU and are an "
        "upper bound for an idle machine. Orchestrator phases overlap with workers that run in parallel "
        "(they compete for the same 2 cores), which also inflates them.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--executor", choices=("auto", "tmux", "subprocess"), default="auto")
    parser.add_argument("--hypotheses", default=",".join(HYPOTHESES), help="demo hypothesis ids, comma-separated")
    parser.add_argument("--out", type=Path, default=None, help="also write the Markdown here")
    args = parser.parse_args()
    hypotheses = [h for h in args.hypotheses.split(",") if h]
    command = (
        f"python benchmarks/loop_overhead.py --runs {args.runs} --workers {args.workers} --executor {args.executor}"
    )
    load_start, started = os.getloadavg(), datetime.now(UTC)
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
            print(
                f"run {index + 1}/{args.runs}: {run['experiments']} experiments, wall {run['wall_s']:.1f} s, "
                f"orchestrator {run['orchestrator_s']:.2f} s ({run['decisions']}; stopped: {run['reason']})",
                flush=True,
            )
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        if previous_cache is None:
            os.environ.pop("ORCHARD_CACHE_DIR", None)
        else:
            os.environ["ORCHARD_CACHE_DIR"] = previous_cache
    text = report(runs, hypotheses, args.workers, args.executor, (load_start, os.getloadavg()), command, started)
    print(text)
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
