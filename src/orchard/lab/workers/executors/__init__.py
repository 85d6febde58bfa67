"""Executors: where workers run. `make_executor` picks a process executor from the configuration."""

from __future__ import annotations

import shutil
from pathlib import Path

from orchard.errors import UsageError
from orchard.lab.config.sections import ExecutorKind
from orchard.lab.workers.executors.base import Executor, Started, WorkerStart
from orchard.lab.workers.executors.local import DONE_MARKER, ProcessExecutor
from orchard.lab.workers.executors.subprocess import SubprocessExecutor
from orchard.lab.workers.executors.tmux import TmuxExecutor, attach_command


def make_executor(kind: ExecutorKind, socket_name: str, runtime_dir: Path | None = None) -> ProcessExecutor:
    """`tmux`, `subprocess`, or `auto` (tmux when installed); `socket_name` and `runtime_dir` are the workspace's."""
    if kind == ExecutorKind.AUTO:
        kind = ExecutorKind.TMUX if shutil.which("tmux") else ExecutorKind.SUBPROCESS
    if kind == ExecutorKind.TMUX:
        return TmuxExecutor(socket_name, runtime_dir)
    if kind == ExecutorKind.SUBPROCESS:
        return SubprocessExecutor()
    raise UsageError(f"unknown executor {kind!r}; known: auto, tmux, subprocess")


__all__ = ["DONE_MARKER", "Executor", "ProcessExecutor", "Started", "SubprocessExecutor", "TmuxExecutor", "WorkerStart",
           "attach_command", "make_executor"]
