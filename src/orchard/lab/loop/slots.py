"""The lab's worker slots: each worker's name and the lane it serves.

Exploit lanes come first, then explore, so a worker keeps its name and lane
from one run of the same configuration to the next.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchard.lab.records.hypothesis import Lane
from orchard.lab.workers.workspace.workspace import Workspace


@dataclass(frozen=True)
class Slot:
    """One worker and its lane."""

    worker: str
    lane: Lane


def slots(ws: Workspace) -> list[Slot]:
    """Worker names and their lanes: exploit lanes first, then explore."""
    workers = ws.config.workers
    return [Slot(f"w{i + 1}", Lane.EXPLOIT if i < workers.exploit else Lane.EXPLORE) for i in range(workers.count)]
