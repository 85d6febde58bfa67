"""After a landed win: the opportunities re-read and, every few wins, the full sweep.

The sweep measures main against the lab's first baseline, so the journal shows the whole
run's gain, not only each win's step.
"""

from __future__ import annotations

from collections.abc import Callable

from orchard.lab.db.state import LabState
from orchard.lab.judge.measuring import MeasureProgress, measure, opportunities
from orchard.lab.loop import stop
from orchard.lab.loop.start import recorded_start
from orchard.lab.records.build import CheckName
from orchard.lab.records.events import OpportunitiesRead
from orchard.lab.records.measured_events import Swept
from orchard.lab.workers.workspace.builds import baseline_binary, placeholders, run_step
from orchard.lab.workers.workspace.workspace import Workspace


def after_win(ws: Workspace, state: LabState, *, say: Callable[[str], None],
              measure_progress: MeasureProgress | None = None) -> bool:
    """Re-read the opportunities; every few wins, run the full sweep (True: it ran, the notebook is behind)."""
    items = opportunities(ws)
    top = tuple(f"{i.scenario}/{i.operation} {i.metric}: {i.subject} vs {i.comparator} gap {i.gap}" for i in items[:3])
    state.log(OpportunitiesRead(len(items), top))
    if state.counter(stop.MERGED) % ws.config.bench.sweep_every:
        return False
    sweep(ws, state, say=say, measure_progress=measure_progress)
    return True


def sweep(ws: Workspace, state: LabState, *, say: Callable[[str], None],
          measure_progress: MeasureProgress | None = None) -> None:
    main = ws.target_base()
    say(f"full sweep: main {main[:12]} against the lab's first baseline")
    started = recorded_start(state)
    first = baseline_binary(ws, state, started.base if started else main)
    verdict = measure(ws, first, baseline_binary(ws, state, main), progress=measure_progress)
    swept = Swept(main, verdict)
    if ws.config.bench.sweep:
        values = placeholders(ws, ws.reference_target, baseline_binary(ws, state, main).path)
        check = run_step(CheckName.SWEEP, ws.config.bench.sweep, ws.bench_dir, values, ws.judge_dir / "sweep-logs")
        swept = Swept(main, verdict, check.detail, check.log)
    state.log(swept)

