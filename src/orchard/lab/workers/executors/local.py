"""Workers on this machine: the executor contract for processes (tmux windows, plain subprocesses).

A job is one worker's launch line. Every process executor runs it the same way
(after exporting the job's own environment variables):

    bash -c '{ <launch>
    } </dev/null 2>&1 | tee -a logs/<experiment>.log
    rc=${PIPESTATUS[0]}; echo WORKER_DONE_$rc | tee -a logs/<experiment>.log; exit $rc'

so the log holds everything the worker printed and ends with its exit code,
and the wrapper's own exit status is the launch's. A job with a sandbox
(every worker a launcher starts) has only its launch line confined
(`sandbox.Confinement.command`: `env -i ... bwrap ... -- bash -c <launch>`);
the `tee` and the exit line stay outside, with the orchestrator. The executor reads that
status from the process (tmux: the dead pane's status), never from the text.

A job past its timeout, or cancelled, has every process below the wrapper
killed (the whole tree, found through psutil, whatever sessions or process
groups its members made); the wrapper then records the exit code (137) and
ends. Nothing outlives `close()`, which also runs on Ctrl-C through the
context manager, and at interpreter exit as a last resort.
"""

from __future__ import annotations

import atexit
import contextlib
import shlex
import time
from abc import abstractmethod
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from orchard.errors import UsageError
from orchard.lab.workers.executors.base import Executor, Started, WorkerStart
from orchard.lab.workers.jobs.job import Job, JobResult
from orchard.lab.workers.jobs.process_tree import kill_tree

DONE_MARKER = "WORKER_DONE_"
# After the tree below the wrapper is killed, how long the wrapper may take
# to write its exit line before it is killed too.
WRAPPER_GRACE_S = 5.0
POLL_INTERVAL_S = 0.2
LOG_TAIL_BYTES = 4 << 20  # of a worker's log, what collection reads (usage, the agent's own error)


def wrap(job: Job, status_file: Path | None = None) -> str:
    """The bash script that runs a job's launch line with its log and exit line.

    With `status_file`, the exit code is also written there just before the
    wrapper exits (for executors whose own record of it can be lost).
    """
    log = shlex.quote(str(job.log_path))
    exports = "".join(f"export {key}={shlex.quote(value)}\n" for key, value in job.env.items())
    record = f"echo $rc > {shlex.quote(str(status_file))}\n" if status_file is not None else ""
    launch = job.command if job.sandbox is None else job.sandbox.command(job.command, job.env)
    return (
        exports + "{ " + launch + "\n} </dev/null 2>&1 | tee -a " + log + "\n"
        "rc=${PIPESTATUS[0]}\n"
        f"echo {DONE_MARKER}$rc | tee -a {log}\n"
        + record + "exit $rc\n"
    )


def _duration(entry: _Running) -> float:
    """From the start to the worker's real exit: its exit line is the last write to its log.

    Collection may come much later (a loop busy judging); that wait is not the worker's.
    """
    try:
        ended = entry.job.log_path.stat().st_mtime
        return max(0.0, ended - datetime.fromisoformat(entry.started_at).timestamp())
    except (OSError, ValueError):
        return time.monotonic() - entry.started


def log_tail(log_path: Path, limit: int = LOG_TAIL_BYTES) -> str:
    """The last `limit` bytes of a worker's log as text ("" if unreadable): a log can be huge, and what
    orchard reads from it (the exit line, the agent's final result and usage) is at its end."""
    try:
        with log_path.open("rb") as log:
            log.seek(max(0, log.seek(0, 2) - limit))
            return log.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def exit_line(log_path: Path) -> int | None:
    """The exit code the wrapper wrote as its log's last line."""
    lines = log_tail(log_path, 4096).strip().splitlines()
    for line in reversed(lines[-5:]):
        code = line[len(DONE_MARKER):]
        if line.startswith(DONE_MARKER) and code.isdigit():
            return int(code)
    return None


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass
class _Running:
    job: Job
    pid: int  # the wrapper's pid
    handle: object  # executor-specific
    started_at: str
    started: float
    deadline: float | None
    ended_by: str | None = None  # "timeout" or "cancelled" once orchard killed it
    note: str | None = None  # why, in words
    killed_at: float | None = None


class ProcessExecutor(Executor):
    """Starts jobs as processes on this machine, enforces their timeouts, reports how each one ended.

    Besides the lab's workers (`start_worker`), any job runs here (`start`): the planner's, the reviewer's, a
    dask worker's own launcher.
    """

    def __init__(self) -> None:
        self._running: dict[str, _Running] = {}
        self._closed = False
        atexit.register(self.close)

    # -- what each executor provides -----------------------------------------

    @abstractmethod
    def _launch(self, job: Job) -> tuple[int, object]:
        """Start `bash -c <wrap(job)>`; return the wrapper's pid and a handle."""

    @abstractmethod
    def _statuses(self) -> dict[str, tuple[int | None, int | None] | None]:
        """For each running job: None while it runs, else (exit code, signal)."""

    @abstractmethod
    def _release(self, running: _Running) -> None:
        """Forget a finished job (tmux: close its window)."""

    @abstractmethod
    def _shutdown(self, killed: list[_Running]) -> None:
        """Reap `killed` jobs and remove what the executor itself started (tmux: its server)."""

    def _find(self, job: Job) -> tuple[int, object] | None:
        """A job of this name still running from an earlier orchard process (pid, handle)."""
        return None

    def adopt(self, start: WorkerStart) -> bool:
        """Track a worker an earlier, killed orchard started, if it is still there to watch.

        Its timeout counts from now: the earlier deadline died with that process.
        """
        job = start.job
        found = self._find(job)
        if found is None:
            return False
        pid, handle = found
        now = time.monotonic()
        deadline = None if job.timeout_s is None else now + job.timeout_s
        self._running[job.name] = _Running(job, pid, handle, _now_iso(), now, deadline)
        return True

    def ended_earlier(self, start: WorkerStart) -> JobResult | None:
        """How a worker an earlier orchard started ended while nobody watched, from its log's exit line.

        None when the log has no exit line: the worker died with that orchard.
        """
        job = start.job
        code = exit_line(job.log_path)
        if code is None:
            return None
        return JobResult(name=job.name, exit_code=code, signal=None, timed_out=False, cancelled=False,
                         started_at="", duration_s=0.0, log_path=job.log_path, reason="collected after a restart")

    # -- the contract ----------------------------------------------------------

    def start_worker(self, start: WorkerStart) -> Started:
        """Prepare the worker in the lab's workspace (checkouts, baseline copy, prompt), then run its job."""
        prompt = start.prepare()
        self.start(start.job)
        return Started(prompt=prompt)

    def start(self, job: Job) -> None:
        """Start a job; its name must not be running already."""
        if self._closed:
            raise RuntimeError("this executor is closed")
        if job.name in self._running:
            raise UsageError(f"experiment {job.name!r} is already running")
        job.log_path.parent.mkdir(parents=True, exist_ok=True)
        if not Path(job.cwd).is_dir():
            raise UsageError(f"{job.cwd}: the worker's directory does not exist")
        pid, handle = self._launch(job)
        now = time.monotonic()
        deadline = None if job.timeout_s is None else now + job.timeout_s
        self._running[job.name] = _Running(job, pid, handle, _now_iso(), now, deadline)

    def running(self) -> list[str]:
        return list(self._running)

    def pids(self) -> dict[str, int]:
        """Each running job's wrapper pid (for status displays and leftover checks)."""
        return {name: entry.pid for name, entry in self._running.items()}

    def cancel(self, name: str, reason: str = "cancelled") -> None:
        """Kill a running job's process tree; its result arrives through `poll`."""
        entry = self._running.get(name)
        if entry is None:
            raise UsageError(f"experiment {name!r} is not running")
        self._end(entry, "cancelled", reason)

    def _end(self, entry: _Running, ended_by: str, note: str) -> None:
        if entry.ended_by is not None:
            return
        entry.ended_by = ended_by
        entry.note = note
        entry.killed_at = time.monotonic()
        with contextlib.suppress(OSError), entry.job.log_path.open("a", encoding="utf-8") as log:
            log.write(f"\n[orchard] {note}: killing the worker's processes\n")  # a full disk: killed all the same
        kill_tree(entry.pid, include_root=False)

    def poll(self) -> list[JobResult]:
        """Enforce timeouts; return the jobs that ended since the last call."""
        now = time.monotonic()
        for entry in self._running.values():
            if entry.deadline is not None and now >= entry.deadline and entry.ended_by is None:
                self._end(entry, "timeout", f"timeout after {entry.job.timeout_s:g} s")
            elif entry.killed_at is not None and now - entry.killed_at > WRAPPER_GRACE_S:
                kill_tree(entry.pid, include_root=True)
        finished: list[JobResult] = []
        for name, status in self._statuses().items():
            if status is None:
                continue
            entry = self._running.pop(name)
            exit_code, sig = status
            reason = entry.note
            if reason is None and exit_code is None and sig is None:
                reason = "its window or process vanished outside orchard"
            finished.append(
                JobResult(
                    name=name,
                    exit_code=exit_code,
                    signal=sig,
                    timed_out=entry.ended_by == "timeout",
                    cancelled=entry.ended_by == "cancelled",
                    started_at=entry.started_at,
                    duration_s=_duration(entry),
                    log_path=entry.job.log_path,
                    reason=reason,
                )
            )
            self._release(entry)
        return finished

    def wait(self, timeout_s: float | None = None) -> list[JobResult]:
        """Poll until no job is running (or `timeout_s` passed); return the results gathered."""
        results: list[JobResult] = []
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            results.extend(self.poll())
            if not self._running or (deadline is not None and time.monotonic() >= deadline):
                return results
            time.sleep(POLL_INTERVAL_S)

    def close(self) -> None:
        """Kill every running job's whole tree and remove what the executor started."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        killed = list(self._running.values())
        for entry in killed:
            kill_tree(entry.pid, include_root=True)
        self._running.clear()
        self._shutdown(killed)
