"""After a landed win: the opportunities re-read and, every few wins, the full sweep.

The sweep measures main against the lab's first baseline, so the journal shows the whole
run's gain, not only each win's step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchard.lab import stop
from orchard.lab.builds import baseline_binary, placeholders, run_step
from orchard.lab.events import OpportunitiesRead
from orchard.lab.measured_events import Swept
from orchard.lab.start import recorded_start
from orchard.lab.verdicts import measure, opportunities

if TYPE_CHECKING:
    from orchard.lab.loop import Lab


def after_win(lab: Lab) -> None:
    """Re-read the opportunities; every few wins, run the full sweep."""
    items = opportunities(lab.ws)
    top = tuple(f"{i['scenario']}/{i['operation']} {i['metric']}: {i['subject']} vs {i['comparator']} gap {i['gap']}"
                for i in items[:3])
    lab.state.log(OpportunitiesRead(len(items), top))
    if lab.state.counter(stop.MERGED) % lab.ws.config.bench.sweep_every == 0:
        sweep(lab)


def sweep(lab: Lab) -> None:
    ws = lab.ws
    main = ws.target_base()
    lab.say(f"full sweep: main {main[:12]} against the lab's first baseline")
    started = recorded_start(lab.state)
    first = baseline_binary(ws, lab.state, started.base if started else main)
    verdict = measure(ws, first, baseline_binary(ws, lab.state, main), progress=lab.measure_progress)
    swept = Swept(main, verdict)
    if ws.config.bench.sweep:
        values = placeholders(ws, ws.reference_target, baseline_binary(ws, lab.state, main).path)
        check = run_step("sweep", ws.config.bench.sweep, ws.bench_dir, values, ws.judge_dir / "sweep-logs")
        swept = Swept(main, verdict, check.detail, check.log)
    lab.state.log(swept)
    lab.render()

