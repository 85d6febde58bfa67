"""`orchard status`: the lab at a glance, from the same snapshot the dashboard shows.

Workers (what each runs, for how long, where its log is, and the command to
watch it live), the top of the backlog, the leaderboard, and who holds the
measurement lock right now; `--watch` redraws it while the lab runs.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from orchard.lab.executors import attach_command
from orchard.lab.view import LabView


def status(lab: LabView) -> dict[str, Any]:
    """The snapshot as `orchard status --json` prints it."""
    lock = lab.lock
    holder = {"pid": lock.holder_pid, "label": lock.holder_label, "since": lock.holder_since} if lock.holder_pid else None
    return {
        "workspace": lab.workspace,
        "executor": lab.executor,
        "attach": attach_command(lab.tmux_socket) if lab.executor != "subprocess" else None,
        "workers": [{"experiment": w.experiment, "worker": w.worker, "lane": w.lane, "status": w.status,
                     "minutes": round(w.elapsed_s / 60, 1), "log": w.log, "hypothesis": w.hypothesis}
                    for w in lab.workers],
        "decisions": dict(lab.decisions),
        "backlog": [{"id": b.id, "score": round(b.score, 3), "lane": b.lane, "title": b.title} for b in lab.backlog[:8]],
        "leaderboard": [asdict(row) for row in lab.leaderboard],
        "lock": {"state": lock.state, "path": lock.path, "holder": holder, "queue": list(lock.queue)},
        "stopped": lab.stopped,
    }
