"""`orchard status`: the lab at a glance, from lab.db and the machine.

Workers (what each runs, for how long, where its log is, and the command to
watch it live), the top of the backlog, the leaderboard, and who holds the
measurement lock right now.
"""

from __future__ import annotations

import time
from typing import Any

from filelock import FileLock, Timeout

from orchard.bench.lock import default_lock_path, lock_disabled, read_holder
from orchard.lab import backlog, records
from orchard.lab.executors import attach_command
from orchard.lab.experiment import ExperimentStatus
from orchard.lab.judgment import Decision
from orchard.lab.state import LabState
from orchard.lab.workspace import Workspace


def lock_state() -> dict[str, Any]:
    """Whether the machine-wide measurement lock is free, and who last held it."""
    if lock_disabled():
        return {"state": "disabled"}
    path = default_lock_path()
    probe = FileLock(path, mode=0o666, thread_local=False, preserve_lock_file=True)
    try:
        probe.acquire(timeout=0)
    except Timeout:
        return {"state": "held", "holder": read_holder(path), "path": str(path)}
    probe.release()
    return {"state": "free", "last_holder": read_holder(path), "path": str(path)}


def status(ws: Workspace, state: LabState) -> dict[str, Any]:
    now = time.time()
    experiments = state.experiments()
    workers = [
        {"experiment": e.name, "worker": e.worker, "lane": e.lane, "status": e.status,
         "minutes": round((now - e.started_at) / 60, 1), "log": str(ws.log_path(e.name)),
         "hypothesis": e.hypothesis}
        for e in experiments if e.status in ExperimentStatus.active()
    ]
    stops = state.events("stop")
    return {
        "workspace": str(ws.root),
        "executor": ws.config.workers.executor,
        "attach": attach_command(ws.tmux_socket) if ws.config.workers.executor != "subprocess" else None,
        "workers": workers,
        "decisions": {d: sum(1 for e in experiments if e.decision == d) for d in Decision},
        "backlog": [{"id": r.id, "score": round(r.hypothesis.score, 3), "lane": r.hypothesis.lane,
                     "title": r.hypothesis.title} for r in backlog.ranked(state)[:8]],
        "leaderboard": [row.to_dict() for row in records.leaderboard(state)],
        "lock": lock_state(),
        "stopped": stops[-1].data["reason"] if stops and not workers else None,
    }
