"""`orchard status`: the lab at a glance, from the same snapshot the dashboard shows.

Workers (what each runs, for how long, where its log is, and the command to
watch it live), the top of the backlog, the leaderboard, and who holds the
measurement lock right now; `--watch` redraws it while the lab runs.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from orchard.fitted import Fitted
from orchard.lab.config.sections import ExecutorKind
from orchard.lab.db.state import LabState
from orchard.lab.judge.measuring import LockState
from orchard.lab.judge.verdict_view import effect_cells
from orchard.lab.notebook import view
from orchard.lab.notebook.leaderboard import LeaderRow
from orchard.lab.notebook.spending import money
from orchard.lab.notebook.view import LabView, WorkerView
from orchard.lab.text import visible
from orchard.lab.workers.executors import attach_command
from orchard.lab.workers.sandbox.sandbox import UNSANDBOXED_NOTE, SandboxMode
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.units import quantity

WATCH_INTERVAL_S = 2.0


def status(lab: LabView) -> dict[str, Any]:
    """The snapshot as `orchard status --json` prints it."""
    lock = lab.lock
    holder = (
        {"pid": lock.holder_pid, "label": lock.holder_label, "since": lock.holder_since} if lock.holder_pid else None
    )
    return {
        "workspace": lab.workspace,
        "executor": lab.executor,
        "sandbox": lab.sandbox,
        "limits": lab.limits,
        "attach": attach_command(lab.tmux_socket) if lab.executor in (ExecutorKind.AUTO, ExecutorKind.TMUX) else None,
        "workers": [{"experiment": w.experiment, "worker": w.worker, "lane": w.lane, "status": w.status,
                     "minutes": round(w.elapsed_s / 60, 1), "log": w.log, "hypothesis": w.hypothesis,
                     "launcher": w.launcher, "host": w.host}
                    for w in lab.workers],
        "decisions": dict(lab.decisions),
        "held": [{"experiment": e.name, "findings": list(e.held)} for e in lab.experiments if e.held],
        "backlog": [
            {"id": b.id, "score": round(b.score, 3), "lane": b.lane, "title": b.title, "revisited": b.revisited}
            for b in lab.backlog[:8]
        ],
        "leaderboard": [asdict(row) for row in lab.leaderboard],
        "lock": {"state": lock.state, "path": lock.path, "holder": holder, "queue": list(lock.queue)},
        "judges": [{"judge": q.judge, "work": list(q.work)} for q in lab.judges],
        "stopped": lab.stopped,
        "paused_by": lab.paused,
        "spending": [asdict(row) for row in lab.spending],
        "budgets": [asdict(b) | {"left": round(b.left, 6)} for b in lab.budgets],
    }


def render(lab: LabView) -> Group:
    """The snapshot for a terminal: what `orchard status` prints and `--watch` redraws."""
    parts: list[RenderableType] = [Text(f"lab {lab.workspace}")]
    if lab.paused is not None:
        parts.append(Text(f"paused by {visible(lab.paused)}: no new workers until `orchard resume {lab.workspace}`",
                          style="bold yellow"))
    if lab.sandbox == SandboxMode.NONE:
        parts.append(Text(UNSANDBOXED_NOTE, style="bold red"))
    elif lab.limits:
        parts.append(Text(f"limits per worker and judge step: {lab.limits}"))
    if lab.workers:
        table = Table("experiment", "worker", "lane", "launcher", "status", "minutes", "host", "log",
                      show_edge=False, header_style="bold")
        for w in lab.workers:
            table.add_row(w.experiment, w.worker, w.lane, visible(w.launcher), w.status,
                          str(round(w.elapsed_s / 60, 1)), visible(w.host), visible(w.log))
        parts.append(Fitted([table], [_worker_block(w) for w in lab.workers]))
        if lab.executor in (ExecutorKind.AUTO, ExecutorKind.TMUX):
            parts.append(Text(f"watch the workers live: {attach_command(lab.tmux_socket)}"))
    else:
        parts.append(Text("no worker is running" + (f"; stopped: {visible(lab.stopped)}" if lab.stopped else "")))
    d = lab.decisions
    parts.append(Text(f"decisions: {d.get('LAND', 0)} LAND, {d.get('KILL', 0)} KILL, {d.get('ITERATE', 0)} ITERATE"))
    for win in (e for e in lab.experiments if e.held):
        parts.append(Text(f"held for review: {win.name} (orchard review {lab.workspace} --land|--kill {win.name})",
                          style="bold yellow"))
        parts += [Text(f"  {visible(finding)}") for finding in win.held]
    if lab.backlog:
        parts.append(Text("backlog (top): " + ", ".join(f"{visible(b.id)} ({round(b.score, 3)}{b.note})"
                                                          for b in lab.backlog[:8])))
    board = Table("metric", "baseline (start)", "best change", "its effect", "main vs start", "floor", show_edge=False,
                  header_style="bold")
    for row in lab.leaderboard:
        board.add_row(*_leader_cells(row))
    parts.append(Fitted([board], [_leader_block(row) for row in lab.leaderboard]))
    lock = lab.lock
    held = lock.state == LockState.HELD and lock.holder_pid
    holder = f" by pid {lock.holder_pid} ({lock.holder_label})" if held else ""
    queue = f"; queue: {', '.join(f'pid {pid}' for pid in lock.queue)}" if lock.queue else ""
    parts.append(Text(f"measurement lock: {lock.state}{holder}{queue}"))
    parts += [Text(f"judge {visible(q.line())}") for q in lab.judges]
    if lab.spending:
        total = lab.spending[-1]
        spent = money(total.cost_usd, total.agents, total.estimated)
        parts.append(Text(f"spent: {spent} of agent cost over {total.experiments} experiments, {total.wins} kept"))
    parts += [Text("budget left: " + b.describe()) for b in lab.budgets]
    return Group(*parts)


def _worker_block(w: WorkerView) -> Text:
    """One worker as a few short lines: its table row stacked, for a console too narrow for the table."""
    return Text.assemble((w.experiment, "bold"), f"  {w.status}, {round(w.elapsed_s / 60, 1)} min",
                         f"\n  worker {w.worker}, lane {w.lane}, launcher {visible(w.launcher)}, "
                         f"host {visible(w.host)}",
                         f"\n  log {visible(w.log)}")


def _leader_cells(row: LeaderRow) -> list[str]:
    return [visible(row.metric), quantity(row.baseline, row.metric), "-" if row.effect is None else visible(row.by),
            *effect_cells(row.effect, row.final)]


def _leader_block(row: LeaderRow) -> Text:
    """One leaderboard row stacked, as `_worker_block`."""
    metric, baseline, by, effect, final, floor = _leader_cells(row)
    return Text.assemble((metric, "bold"), f"\n  baseline (start) {baseline}, floor {floor}",
                         f"\n  best change {by}", f"\n  its effect {effect}", f"\n  main vs start {final}")


def watch(ws: Workspace, state: LabState, console: Console, interval_s: float = WATCH_INTERVAL_S) -> None:
    """Redraw the status in place until Ctrl-C (which ends the watch, never the lab)."""
    with Live(render(view.build(ws, state)), console=console, refresh_per_second=4, screen=False) as live:
        try:
            while True:
                time.sleep(interval_s)
                live.update(render(view.build(ws, state)))
        except KeyboardInterrupt:
            pass
