"""How long a lab has run: the time `orchard run` worked on it, across resumes, which `max_wall_minutes` counts.

A lab stopped overnight, or paused by a person with nothing at work, spends none of its wall-time budget:
the loop adds the time since its previous check to the total in lab.db (`meta` key `ran_s`) at every pass
it decides in (at least every few seconds, db/settled.py), so a crash loses only the seconds since its last
check. A lab recorded before this total was kept counts from its first start to its last stop, as it did.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from orchard.lab.db.state import LabState
from orchard.lab.records.events import LabStopped

RAN_S = "ran_s"


def ran_s(state: LabState) -> float:
    """The lab's running time so far, in seconds (0 before its first run)."""
    recorded = state.meta(RAN_S)
    if recorded is not None:
        return float(recorded)
    started, stops = state.meta("started_at"), state.events_of(LabStopped)
    return max(0.0, stops[-1].at - float(started)) if started is not None and stops else 0.0


def add_ran(state: LabState, seconds: float) -> None:
    """Add `seconds` the lab ran to its total."""
    state.set_meta(RAN_S, repr(ran_s(state) + seconds))


class RunClock:
    """One run's share of the running time, added to lab.db's total at each check."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now  # monotonic, not the wall clock: a clock set back or forward changes no budget
        self._mark = now()
        self._unsaved = 0.0  # counted, not yet in lab.db (its write failed: kept for the next check)

    def check(self, state: LabState, *, counting: bool = True) -> None:
        """Add the time since the last check (unless `counting` is False: the lab sat paused, nothing at work)."""
        now = self._now()
        if counting:
            self._unsaved += now - self._mark
        self._mark = now
        if self._unsaved:
            add_ran(state, self._unsaved)
            self._unsaved = 0.0
