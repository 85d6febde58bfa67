"""The backlog's order, read from lab.db: best score first, older first among equals.

The loop picks from the top of it, backlog.md and the dashboard list it,
`orchard backlog` prints it: one order everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchard.lab.db.state import LabState
from orchard.lab.records.db import HypothesisRecord
from orchard.lab.records.hypothesis import HypothesisStatus
from orchard.lab.records.revisit_events import Revisited


def ranked(state: LabState, statuses: Sequence[HypothesisStatus] = (HypothesisStatus.OPEN,)) -> list[HypothesisRecord]:
    """Hypotheses with these statuses, best score first (older first among equals)."""
    records = [r for r in state.hypotheses() if r.status in statuses]
    return sorted(records, key=lambda r: (-r.hypothesis.score, r.created_at, r.id))


def revisited(state: LabState) -> frozenset[str]:
    """The hypotheses a win offered again after their kill (loop/revisit.py): each is revisited once, and every
    list of the backlog marks them."""
    return frozenset(e.event.hypothesis for e in state.events_of(Revisited))
