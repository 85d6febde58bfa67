"""Workers as plain subprocesses: the tmux contract without tmux (CI, headless machines)."""

from __future__ import annotations

import subprocess

from orchard.lab.executors.base import Executor, Job, _Running, wrap


class SubprocessExecutor(Executor):
    kind = "subprocess"

    def _launch(self, job: Job) -> tuple[int, object]:
        proc = subprocess.Popen(
            ["bash", "-c", wrap(job)],
            cwd=job.cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # the wrapper's tee already writes the log
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C at the terminal reaches orchard, which cleans up
        )
        return proc.pid, proc

    def _statuses(self) -> dict[str, tuple[int | None, int | None] | None]:
        statuses: dict[str, tuple[int | None, int | None] | None] = {}
        for name, entry in self._running.items():
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
