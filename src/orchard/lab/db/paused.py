"""Whether a person's pause is in force: the last `orchard pause` with no `orchard resume` after it.

Read from the journal, so the loop (which honours it), `orchard status` and the dashboard (which show it)
agree, and a lab started again is still paused.
"""

from __future__ import annotations

from orchard.lab.db.state import LabState
from orchard.lab.records.db import JournalEvent
from orchard.lab.records.steering_events import Paused, Resumed


def paused(state: LabState) -> JournalEvent[Paused] | None:
    """The pause in force, or None."""
    pauses, resumes = state.events_of(Paused), state.events_of(Resumed)
    if not pauses or (resumes and resumes[-1].id > pauses[-1].id):
        return None
    return pauses[-1]
