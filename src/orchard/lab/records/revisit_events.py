"""The journal's record of a KILLed hypothesis offered again: the win that made it worth another try, and why.

A kill is a measurement of one idea against one main. When a later win changes the files the idea was about,
or moves main by more than the effect the idea was measured at, that measurement is stale: the lab puts the
hypothesis back in the backlog once (docs/loop.md, "Revisiting a kill"), and this event is what says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from orchard.lab.records.events import Event, EventKind


@dataclass(frozen=True)
class Revisited(Event):
    """A KILLed hypothesis back in the backlog: the experiment that killed it, the win that revisits it, why."""

    kind = EventKind.REVISIT
    hypothesis: str
    killed_by: str  # the experiment whose KILL is revisited
    win: str  # the experiment whose landing made it worth another try
    because: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(str(data["hypothesis"]), str(data.get("killed_by", "?")), str(data.get("win", "?")),
                   str(data.get("because", "")))

    def describe(self) -> str:
        return (f"Revisited {self.hypothesis} (KILLed in {self.killed_by}): {self.because}; back in the backlog "
                "once, ranked as usual.")
