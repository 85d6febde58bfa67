"""The lab's executor, made from its orchard.toml: the one place that picks the dask executor or a process one,
so the loop never names a concrete executor."""

from __future__ import annotations

from orchard.lab.config.sections import ExecutorKind
from orchard.lab.workers.dask.executor import DaskExecutor
from orchard.lab.workers.executors import Executor, make_executor
from orchard.lab.workers.workspace.workspace import Workspace


def lab_executor(ws: Workspace) -> Executor:
    """`[workers] executor`: a dask cluster's, or tmux windows or subprocesses on this machine (`make_executor`)."""
    kind = ws.config.workers.executor
    return DaskExecutor(ws) if kind == ExecutorKind.DASK else make_executor(kind, ws.tmux_socket, ws.executor_dir)
