"""The lab's start as the journal records it: the anchor every later delta is measured from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from orchard.lab.records.events import Event, EventKind


@dataclass(frozen=True)
class LabStart(Event):
    """The anchor: the bases, the baseline build, and each metric's baseline median and noise floor."""

    kind = EventKind.LAB_START
    base: str
    bench_base: str
    binary: str
    calibration: str
    baseline: dict[str, float] = field(default_factory=dict)
    floors: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(data["base"], data.get("bench_base", ""), data.get("binary", ""), data.get("calibration", "-"),
                   dict(data.get("baseline", {})), dict(data.get("floors", {})))
