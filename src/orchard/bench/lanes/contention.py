"""The `contention` lane: `orchard bench contention`.

N workers, started together, each make K commits and publish them, in two
modes:

- `shared_checkout`: every worker commits in one checkout (each to its own
  tracked file, the flow's `commit_path`), so they contend for the index and
  HEAD locks; each then publishes HEAD to its own branch of the remote.
- `clone_per_worker`: one bare remote, one clone per worker; every commit
  (`commit_all`) is published to `main` at once, so workers race for the one
  ref: a rejected publication is followed by the flow's `sync` and another try.

Every command comes from the subject's flow (`[contention]`): a flow without
the keys a mode needs is a skip row naming them. The fixture and the integrity
checks use the harness's own git, never the subject.

A command that loses a race (a held lock, a rejected push) is retried with
exponential, fully jittered backoff and counted. Integrity is checked after
the run: every commit the CLI reported as made must be in the final history
and its line in the final tree (a missing one is a lost update), and `git
fsck` must be clean. Any lost update, fsck error or worker failure (a command
that failed outright or kept losing past the retry deadline; its unmade
commits are `commits_not_made`, not lost updates) fails the row.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import psutil

from orchard import process
from orchard.bench import rows, tokens
from orchard.bench.flows import Flow
from orchard.bench.lanes.remotes import harness
from orchard.bench.lanes.session import LaneResult, check_common, lane_context
from orchard.bench.lanes.steps import Recorder, fail
from orchard.bench.lanes.summary import skips_and_failures, subjects_section, table
from orchard.bench.subjects import Subject
from orchard.errors import FixtureError, UsageError

LANE = "contention"
SCENARIO = "contention_v1"
TOTAL = "contention.total"
MODES = ("shared_checkout", "clone_per_worker")
DEFAULT_COMMITS = 5
DEFAULT_RETRY_DEADLINE_S = 300.0
DEFAULT_STEP_TIMEOUT_S = 120.0
LOST_RACE = re.compile(
    r"index\.lock|cannot lock ref|unable to create .*\.lock|is at [0-9a-f]+ but expected|"
    r"\[rejected\]|fetch first|non-fast-forward|failed to push some refs|failed to update ref",
    re.IGNORECASE,
)
BACKOFF_BASE_S = 0.005
BACKOFF_CAP_S = 0.2


def parse_workers(text: str) -> list[int]:
    """`--workers 2,8,32`: positive integers."""
    counts: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdecimal() or int(part) < 1:
            raise UsageError(f"--workers {text!r}: {part!r} is not a positive integer")
        counts.append(int(part))
    return counts


NEEDS = {
    "shared_checkout": ("[contention] clone", "[contention] commit_path", "[contention] publish"),
    "clone_per_worker": ("[contention] clone", "[contention] commit_all", "[contention] publish", "[contention] sync"),
}


@dataclass
class ContentionOptions:
    subjects: list[Subject]
    flows: Mapping[str, Flow]
    results: Path
    workers: list[int] = field(default_factory=lambda: [2, 8, 32])
    commits: int = DEFAULT_COMMITS
    modes: Sequence[str] = MODES
    runs: int = 1
    retry_deadline_s: float = DEFAULT_RETRY_DEADLINE_S
    step_timeout_s: float = DEFAULT_STEP_TIMEOUT_S
    keep_workdirs: bool = False
    workdir: Path | None = None

    def validate(self) -> None:
        if self.commits < 1:
            raise UsageError(f"--commits must be at least 1, not {self.commits}")
        check_common(self.runs, self.subjects)
        unknown = [mode for mode in self.modes if mode not in MODES]
        if unknown:
            raise UsageError(f"unknown contention mode {unknown[0]!r}; valid: {', '.join(MODES)}")


@dataclass
class Worker:
    """One worker's commands and what they cost."""

    index: int
    checkout: Path
    calls: list[dict[str, Any]] = field(default_factory=list)
    made: list[str] = field(default_factory=list)  # commits the CLI said it made
    lock_retries: int = 0
    publish_retries: int = 0
    commits: int = 0
    publishes: int = 0
    error: str | None = None
    started: float = 0.0
    ended: float = 0.0

    @property
    def file(self) -> str:
        return f"worker-{self.index:02d}.txt"


class Race:
    """One (subject, mode, N) measurement: fixture, workers racing, integrity.

    Its rows start from the lane's `Recorder` (metadata, subject, comparability,
    stand-ins) like every lane's; the workers' commands are summed into a row
    per worker rather than written one by one, since N x K calls are noise.
    """

    def __init__(
        self,
        rec: Recorder,
        flow: Flow,
        mode: str,
        workers: int,
        options: ContentionOptions,
        root: Path,
        stop: threading.Event,
    ) -> None:
        self.rec, self.git, self.bin, self.flow = rec, rec.ctx.git, str(rec.subject.bin), flow
        self.mode, self.n, self.options = mode, workers, options
        self.root, self.env, self.stop = root, rec.ctx.env, stop
        self.bare = root / "remote.git"
        self.lost_race = re.compile(flow.lost_race, re.IGNORECASE) if flow.lost_race else LOST_RACE

    def values(self, worker: Worker, **more: str) -> dict[str, str]:
        """Template values of the flow's `[contention]` commands for one worker."""
        return {
            "bin": self.bin,
            "root": str(self.root),
            "remote": str(self.bare),
            "workspace": str(worker.checkout),
            "path": worker.file,
            "worker": str(worker.index),
            "message": "",
            "ref": "",
            **more,
        }

    def step(self, worker: Worker, operation: str, key: str, on_lost: str | None = None, **more: str) -> bool:
        """Every command of the flow's `[contention] key`, each until it wins."""
        values = self.values(worker, **more)
        return all(
            self.until_won(worker, operation, command.render(values), on_lost, command.environment(values))
            for command in self.flow.contention[key]
        )

    def call(self, worker: Worker, operation: str, argv: list[str], env: Mapping[str, str]) -> process.Capture:
        capture = process.run(argv, cwd=worker.checkout, env={**self.env, **env}, timeout_s=self.options.step_timeout_s)
        worker.calls.append(
            {
                "operation": operation,
                "elapsed_ms": capture.elapsed_ms,
                "ok": capture.ok,
                **tokens.interaction_fields(
                    self.rec.stand_ins.command(argv), self.rec.stand_ins.text(capture.stdout_text),
                    self.rec.stand_ins.text(capture.stderr_text),
                    stdout_bytes=capture.stdout_bytes, stderr_bytes=capture.stderr_bytes,
                    stdout_truncated=capture.stdout_truncated, stderr_truncated=capture.stderr_truncated,
                ),
            }
        )
        return capture

    def until_won(
        self, worker: Worker, operation: str, argv: list[str], on_lost: str | None, env: Mapping[str, str]
    ) -> bool:
        """Run until it succeeds; a lost race is retried (after a sync when given), anything else fails.

        Backoff is exponential with full jitter, so 32 workers in one checkout
        get through (slowly) instead of starving; a command still losing after
        `retry_deadline_s` fails its worker.
        """
        started = time.monotonic()
        attempt = 0
        while time.monotonic() - started < self.options.retry_deadline_s:
            if self.stop.is_set():
                worker.error = "interrupted"
                return False
            capture = self.call(worker, operation, argv, env)
            if capture.ok:
                return True
            text = capture.stderr_text + capture.stdout_text
            if capture.timed_out or not self.lost_race.search(text):
                worker.error = f"{operation} failed: {'timed out' if capture.timed_out else text.strip()[-300:]}"
                return False
            if on_lost == "sync":
                worker.publish_retries += 1
                if not self.step(worker, "sync", "sync"):
                    return False
            else:
                worker.lock_retries += 1
            time.sleep(random.uniform(0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt)))
            attempt += 1
        worker.error = (
            f"{operation}: still losing races after {self.options.retry_deadline_s:.0f} s ({attempt} retries)"
        )
        return False

    def prepare(self) -> list[Worker]:
        """Untimed: a seeded remote with one tracked file per worker, and the checkouts."""
        seed = self.root / "seed"
        seed.mkdir(parents=True)
        harness([self.git, "init", "-q", "--bare", "-b", "main", str(self.bare)], self.root, self.env)
        for index in range(self.n):
            (seed / f"worker-{index:02d}.txt").write_text(f"worker {index}\n")
        for argv in (
            [self.git, "init", "-q", "-b", "main"],
            [self.git, "add", "."],
            [self.git, "commit", "-q", "-m", "seed"],
            [self.git, "push", "-q", str(self.bare), "main:main"],
        ):
            harness(argv, seed, self.env)
        if self.mode == "shared_checkout":
            shared = Worker(0, self.root / "shared")
            self.clone(shared)
            return [shared] + [Worker(index, shared.checkout) for index in range(1, self.n)]
        workers = [Worker(index, self.root / f"w{index:02d}") for index in range(self.n)]
        for worker in workers:
            self.clone(worker)
        return workers

    def clone(self, worker: Worker) -> None:
        """The flow's `clone` commands (untimed set-up) make the worker's checkout."""
        values = self.values(worker)
        for command in self.flow.contention["clone"]:
            harness(command.render(values), Path(values[command.cwd]), {**self.env, **command.environment(values)})

    def work(self, worker: Worker, barrier: threading.Barrier) -> None:
        barrier.wait()
        worker.started = time.perf_counter()
        try:
            for commit in range(self.options.commits):
                with open(worker.checkout / worker.file, "a", encoding="utf-8") as handle:
                    handle.write(f"w{worker.index} c{commit}\n")
                message = f"w{worker.index} c{commit}"
                key = "commit_path" if self.mode == "shared_checkout" else "commit_all"
                if not self.step(worker, "snapshot", key, message=message):
                    return
                worker.commits += 1
                worker.made.append(message)
                if self.mode == "clone_per_worker":
                    if not self.step(worker, "publish", "publish", on_lost="sync", ref="main"):
                        return
                    worker.publishes += 1
            shared = self.mode == "shared_checkout"
            if shared and self.step(worker, "publish", "publish", ref=f"refs/heads/worker-{worker.index:02d}"):
                worker.publishes += 1
        finally:
            worker.ended = time.perf_counter()

    def integrity(self, workers: Sequence[Worker]) -> dict[str, Any]:
        """What the final history holds, checked by the harness git."""
        histories: dict[int, str] = {}
        trees: dict[int, str] = {}
        if self.mode == "shared_checkout":
            shared = workers[0].checkout
            # The shared checkout is read when git can read it; the remote always.
            log = _quiet(self.git, ["log", "--format=%s", "HEAD"], self.env, shared)
            for worker in workers:
                branch = f"refs/heads/worker-{worker.index:02d}"
                histories[worker.index] = log + _quiet(
                    self.git, ["--git-dir", str(self.bare), "log", "--format=%s", branch], self.env
                )
                trees[worker.index] = _quiet(self.git, ["show", f"HEAD:{worker.file}"], self.env, shared)
            fsck_targets = [shared, self.bare]
        else:
            log = harness([self.git, "--git-dir", str(self.bare), "log", "--format=%s", "main"], self.root, self.env)
            for worker in workers:
                histories[worker.index] = log
                trees[worker.index] = _quiet(
                    self.git, ["--git-dir", str(self.bare), "show", f"main:{worker.file}"], self.env
                )
            fsck_targets = [self.bare]
        missing_commits = missing_lines = 0
        for worker in workers:
            subjects = set(histories[worker.index].splitlines())
            lines = set(trees[worker.index].splitlines())
            for label in worker.made:  # only what the CLI said it committed can be lost
                missing_commits += label not in subjects
                missing_lines += label not in lines
        fsck_errors = []
        for target in fsck_targets:
            capture = process.run(
                [self.git, "fsck", "--no-progress", "--no-dangling"],
                cwd=target,
                env=self.env,
                timeout_s=self.options.step_timeout_s,
            )
            if not capture.ok or capture.stdout_text.strip():
                fsck_errors.append(f"{target.name}: {(capture.stdout_text + capture.stderr_text).strip()[-300:]}")
        return {
            "commits_expected": self.n * self.options.commits,
            "commits_not_made": self.n * self.options.commits - sum(len(w.made) for w in workers),
            "commits_missing_from_history": missing_commits,
            "lines_missing_from_tree": missing_lines,
            "lost_updates": max(missing_commits, missing_lines),
            "fsck_clean": not fsck_errors,
            "fsck_errors": fsck_errors,
        }


def _quiet(git: str, argv: list[str], env: Mapping[str, str], cwd: Path | None = None) -> str:
    """stdout of a read-only check; empty when the object is missing (counted as lost)."""
    capture = process.run([git, *argv], cwd=cwd, env=env, timeout_s=60)
    return capture.stdout_text if capture.ok else ""


def _stop_commands(futures: Sequence[Future[None]]) -> None:
    """On Ctrl-C: kill the process group of every command the workers have running.

    The runner starts each command as its own session leader, so our direct
    children that lead their own group are exactly the workers' commands.
    """
    me = psutil.Process()
    while not all(future.done() for future in futures):
        for child in me.children():
            try:
                if os.getpgid(child.pid) == child.pid:
                    process.kill_group(child.pid)
            except (ProcessLookupError, psutil.Error):
                pass
        wait(futures, timeout=0.1)


def _worker_row(worker: Worker, rec: Recorder) -> dict[str, Any]:
    by_operation: dict[str, float] = {}
    for call in worker.calls:
        by_operation[call["operation"]] = round(by_operation.get(call["operation"], 0.0) + call["elapsed_ms"], 3)
    return {
        **rec.row("worker.total", "worker"),
        "worker": worker.index,
        "elapsed_ms": round((worker.ended - worker.started) * 1000, 3),
        "returncode": 0 if worker.error is None else 1,
        "failure_reason": worker.error,
        "commits": worker.commits,
        "publishes": worker.publishes,
        "lock_retries": worker.lock_retries,
        "publish_retries": worker.publish_retries,
        "retry_count": worker.lock_retries + worker.publish_retries,
        "tool_call_count": len(worker.calls),
        "phase_elapsed_ms": by_operation,
        **tokens.summed_fields(worker.calls),
    }


def measure(race: Race) -> dict[str, Any]:
    """Run one race; writes a row per worker and returns the total row (written)."""
    workers = race.prepare()
    barrier = threading.Barrier(race.n)
    with ThreadPoolExecutor(max_workers=race.n, thread_name_prefix="contention") as pool:
        futures = [pool.submit(race.work, worker, barrier) for worker in workers]
        try:
            for future in futures:
                future.result()
        except BaseException:
            race.stop.set()
            barrier.abort()
            _stop_commands(futures)
            raise
    worker_rows = [_worker_row(worker, race.rec) for worker in workers]
    for row in worker_rows:
        race.rec.emit_total(row)
    wall_s = max(w.ended for w in workers) - min(w.started for w in workers)
    checks = race.integrity(workers)
    snapshots = sum(w.commits for w in workers)
    phase_ms: dict[str, float] = {}
    for row in worker_rows:
        for operation, ms in row["phase_elapsed_ms"].items():
            phase_ms[operation] = round(phase_ms.get(operation, 0.0) + ms, 3)
    total = {
        **race.rec.row(TOTAL, "total"),
        "elapsed_ms": round(wall_s * 1000, 3),
        "returncode": 0,
        "snapshots": snapshots,
        "snapshots_per_second": round(snapshots / wall_s, 3) if wall_s > 0 else None,
        "publishes": sum(w.publishes for w in workers),
        "retry_count": sum(w.lock_retries + w.publish_retries for w in workers),
        "lock_retries": sum(w.lock_retries for w in workers),
        "publish_retries": sum(w.publish_retries for w in workers),
        "tool_call_count": sum(len(w.calls) for w in workers),
        "worker_failures": sum(w.error is not None for w in workers),
        "phase_elapsed_ms": phase_ms,
        **checks,
        **tokens.summed_fields([call for w in workers for call in w.calls]),
    }
    problems = [
        f"{checks['lost_updates']} lost update(s)" if checks["lost_updates"] else "",
        "git fsck is not clean" if not checks["fsck_clean"] else "",
        f"{total['worker_failures']} worker(s) failed" if total["worker_failures"] else "",
    ]
    if any(problems):
        fail(total, "; ".join(p for p in problems if p))
    return race.rec.emit_total(total)


def run_lane(options: ContentionOptions, out: TextIO | None = None) -> LaneResult:
    """Measure every (subject, mode, worker count); returns where the rows went."""
    options.validate()
    out = out or sys.stderr
    stop = threading.Event()
    with lane_context(
        LANE,
        options,
        summary,
        out,
        admitted_chars=process.DEFAULT_ADMITTED_CHARS,
        metadata={},
    ) as (session, ctx):
        for run_index in range(options.runs):
            for subject in options.subjects:
                for mode in options.modes:
                    for count in options.workers:
                        folder = session.root / f"{subject.name}-{mode}-{count}-r{run_index}"
                        rec = Recorder(
                            ctx,
                            subject,
                            SCENARIO,
                            run_index,
                            fields={"remote_transport": "local_file", "mode": mode, "workers": count,
                                    "commits_per_worker": options.commits},
                            fixture_id=f"contention-{mode}-v1",
                            instruction_level="scripted_workers",
                            stand_ins={str(folder): "ROOT"},
                        )
                        flow = options.flows[subject.kind]
                        reason = subject.absent_reason if subject.bin is None else _skip_reason(flow, mode)
                        if reason:
                            rec.skip(reason, operation="contention.skipped")
                            continue
                        print(
                            f"[run] contention {mode} workers={count} commits={options.commits} subject={subject.name}",
                            file=out,
                            flush=True,
                        )
                        folder.mkdir()
                        try:
                            measure(Race(rec, flow, mode, count, options, folder, stop))
                        except FixtureError as error:
                            rec.emit_total(fail({**rec.row(TOTAL, "total"), "returncode": 0}, f"fixture: {error}"))
                        if not options.keep_workdirs:
                            shutil.rmtree(folder, ignore_errors=True)
    return session.result()


def _skip_reason(flow: Flow, mode: str) -> str | None:
    """Why this flow cannot enter this mode (the keys it lacks), or None."""
    if flow.remote != "git":
        return (
            f"the {flow.kind} flow ({flow.path.name}) publishes to {flow.remote!r}; "
            'contention publishes to a git remote (remote = "git")'
        )
    return flow.skip_reason(f"contention {mode}", NEEDS[mode])


def summary(all_rows: Sequence[Mapping[str, Any]]) -> str:
    totals = [row for row in all_rows if row.get("operation") == TOTAL]
    lines = [
        "# Contention summary",
        "",
        "N workers start together; each makes K commits and publishes them. shared_checkout:",
        "one checkout, each worker commits its own file and pushes to its own branch.",
        "clone_per_worker: a clone each, every commit pushed to main (a rejected push is",
        "rebased and retried). Retries count lost races. Integrity: every commit in the final",
        "history and every written line in the final tree (lost updates fail the row), git fsck clean.",
        "Each subject's commands come from its flow's [contention] table.",
    ]
    lines += subjects_section(all_rows)
    lines += [""]
    lines += table(
        (
            "Subject",
            "Mode",
            "Workers",
            "Commits/worker",
            "Wall ms",
            "Snapshots/s",
            "Retries",
            "Tool calls",
            "Lost updates",
            "fsck clean",
            "Result",
        ),
        (
            (
                f"`{r['subject']}`",
                r.get("mode"),
                r.get("workers"),
                r.get("commits_per_worker"),
                r.get("elapsed_ms"),
                r.get("snapshots_per_second"),
                r.get("retry_count"),
                r.get("tool_call_count"),
                r.get("lost_updates"),
                r.get("fsck_clean"),
                "pass" if not rows.is_failure(r) else "FAIL",
            )
            for r in totals
        ),
    )
    lines += skips_and_failures(all_rows)
    return "\n".join(lines) + "\n"
