"""The chart set a page shows, drawn again only when what it shows changed.

Drawing with plotly costs far more than reading lab.db, and the live
dashboard asks every few seconds; the cache key is everything the charts are
drawn from and nothing else (not the clock, not the logs).
"""

from __future__ import annotations

from dataclasses import dataclass

from orchard.lab.notebook.charts import Chart, activity, experiments, main_over_time
from orchard.lab.notebook.view import LabView


@dataclass(frozen=True)
class ChartSet:
    """The charts of one page: main over time, the experiments, activity."""

    main: list[Chart]
    experiments: list[Chart]
    activity: list[Chart]

    def all(self) -> list[Chart]:
        return self.main + self.experiments + self.activity


def _inputs(view: LabView) -> str:
    """Everything the charts are drawn from (and nothing else: not the clock, not the logs)."""
    judged = [(e.name, e.decision, e.status, e.verdict) for e in view.experiments]
    return repr(
        (
            view.main_steps,
            judged,
            view.lock_waits,
            view.busy,
            sorted(view.floors.items()),
            sorted(view.directions.items()),
            sorted(view.baseline.items()),
            view.worker_slots,
        )
    )


class ChartCache:
    """Draws the charts again only when what they show changed (drawing costs far more than reading lab.db)."""

    def __init__(self) -> None:
        self._key: str | None = None
        self._charts = ChartSet([], [], [])

    def charts(self, view: LabView) -> ChartSet:
        key = _inputs(view)
        if key != self._key:
            busy = activity(view)
            self._charts = ChartSet(main_over_time(view), experiments(view), [busy] if busy else [])
            self._key = key
        return self._charts
