"""Workers as plain subprocesses: the tmux contract without tmux (CI, headless machines).

A worker runs in a session of its own, so it outlives an orchard killed
with SIGKILL, like a tmux window does. Its wrapper carries `ORCHARD_JOB=<its
log path>` in its environment: a resumed orchard finds it by that mark and
watches it again (its exit code then comes from the log's exit line), so
a worker is never started twice in one checkout.
"""

from __future__ import annotations

import os
import subprocess

import psutil

from orchard.lab.config.sections import ExecutorKind
from orchard.lab.workers.executors.local import ProcessExecutor, _Running, exit_line, wrap
from orchard.lab.workers.jobs.job import Job

JOB_MARK = "ORCHARD_JOB"


def _mark(proc: psutil.Process | None) -> str | None:
    """A process's job mark (None: none, or a process this user may not read, such as init)."""
    try:
        return None if proc is None else proc.environ().get(JOB_MARK)
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
        return None


class SubprocessExecutor(ProcessExecutor):
    kind = ExecutorKind.SUBPROCESS

    def _launch(self, job: Job) -> tuple[int, object]:
        proc = subprocess.Popen(
            ["bash", "-c", wrap(job)],
            env={**os.environ, JOB_MARK: str(job.log_path)},
            cwd=job.cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # the wrapper's tee already writes the log
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C at the terminal reaches orchard, which cleans up
        )
        return proc.pid, proc

    def _find(self, job: Job) -> tuple[int, object] | None:
        """The wrapper an earlier orchard started for `job`, found by its mark (not one of its children)."""
        for proc in psutil.process_iter():
            try:
                if (_mark(proc) == str(job.log_path) and _mark(proc.parent()) != str(job.log_path)
                        and proc.status() != psutil.STATUS_ZOMBIE):
                    return proc.pid, proc
            except psutil.Error:
                continue
        return None

    def _statuses(self) -> dict[str, tuple[int | None, int | None] | None]:
        statuses: dict[str, tuple[int | None, int | None] | None] = {}
        for name, entry in self._running.items():
            if isinstance(entry.handle, psutil.Process):  # adopted: not our child, its exit line tells
                try:
                    alive = entry.handle.is_running() and entry.handle.status() != psutil.STATUS_ZOMBIE
                except psutil.NoSuchProcess:
                    alive = False
                statuses[name] = None if alive else (exit_line(entry.job.log_path), None)
                continue
            proc: subprocess.Popen[bytes] = entry.handle  # type: ignore[assignment]
            code = proc.poll()
            if code is None:
                statuses[name] = None
            else:
                statuses[name] = (None, -code) if code < 0 else (code, None)
        return statuses

    def _release(self, running: _Running) -> None:
        """Nothing to close: the process was reaped by `poll`."""

    def _shutdown(self, killed: list[_Running]) -> None:
        for entry in killed:
            entry.handle.wait()  # type: ignore[attr-defined]
