"""One (subject, mode, N) race of the contention lane: the fixture, N workers committing and publishing at once
(a lost race retried with exponential, fully jittered backoff), and the integrity checks after it. The lane
around it (the race measured into rows, the summary) is `contention.py`, its options `contention_options.py`."""

from __future__ import annotations

import os
import random
import re
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from orchard import process
from orchard.bench.lanes.contention_options import ContentionOptions
from orchard.bench.lanes.remotes import harness
from orchard.bench.lanes.steps import Recorder
from orchard.bench.measuring import tokens
from orchard.bench.suites.flows import Flow

TOTAL = "contention.total"
LOST_RACE = re.compile(
    r"index\.lock|cannot lock ref|unable to create .*\.lock|is at [0-9a-f]+ but expected|"
    r"\[rejected\]|fetch first|non-fast-forward|failed to push some refs|failed to update ref",
    re.IGNORECASE,
)


BACKOFF_BASE_S = 0.005


BACKOFF_CAP_S = 0.2


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


def stop_commands(futures: Sequence[Future[None]]) -> None:
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
