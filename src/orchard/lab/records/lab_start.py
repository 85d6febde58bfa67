"""The lab's start as the journal records it: the anchor every later delta is measured from."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from orchard.lab.records.db import JournalEvent

LAB_START = "lab-start"


@dataclass(frozen=True)
class LabStart:
    """What the journal's lab-start entry records."""

    base: str
    bench_base: str
    binary: str
    calibration: str
    baseline: dict[str, float] = field(default_factory=dict)
    floors: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LabStart:
        return cls(data["base"], data.get("bench_base", ""), data.get("binary", ""), data.get("calibration", "-"),
                   dict(data.get("baseline", {})), dict(data.get("floors", {})))

    @classmethod
    def first(cls, events: Iterable[JournalEvent]) -> LabStart | None:
        """The lab's start as the journal recorded it (None before it started)."""
        return next((cls.from_dict(e.data) for e in events if e.kind == LAB_START), None)
