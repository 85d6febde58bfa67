"""Executors: where workers run. `make_executor` picks one from the configuration."""

from __future__ import annotations

import shutil
from pathlib import Path

from orchard.errors import UsageError
from orchard.lab.workers.executors.base import DONE_MARKER, Executor, Job, JobResult, kill_tree
from orchard.lab.workers.executors.subprocess import SubprocessExecutor
from orchard.lab.workers.executors.tmux import TmuxExecutor, attach_command


def make_executor(kind: str, socket_name: str, runtime_dir: Path | None = None) -> Executor:
    """`tmux`, `subprocess`, or `auto` (tmux when installed); `socket_name` and `runtime_dir` are the workspace's."""
    if kind == "auto":
        kind = "tmux" if shutil.which("tmux") else "subprocess"
    if kind == "tmux":
        return TmuxExecutor(socket_name, runtime_dir)
    if kind == "subprocess":
        return SubprocessExecutor()
    raise UsageError(f"unknown executor {kind!r}; known: auto, tmux, subprocess")


__all__ = ["DONE_MARKER", "Executor", "Job", "JobResult", "SubprocessExecutor", "TmuxExecutor",
           "attach_command", "kill_tree", "make_executor"]
