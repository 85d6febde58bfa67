"""The events that carry a verdict of main: the full sweep, and the final verdict when the lab stops."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from orchard.lab.records.events import Event, EventKind, text
from orchard.lab.records.verdict import Verdict


def verdict_of(data: Mapping[str, Any], key: str = "verdict") -> Verdict | None:
    value = data.get(key)
    return Verdict.from_dict(value) if isinstance(value, Mapping) and value else None


@dataclass(frozen=True)
class Swept(Event):
    """The full sweep: main against the lab's first baseline, and the configured sweep command."""

    kind = EventKind.SWEEP
    OMITTED = frozenset({"command", "command_log"})
    main: str
    verdict: Verdict | None
    command: str | None = None
    command_log: str | None = None

    @property
    def measured(self) -> Verdict | None:
        return self.verdict

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(str(data.get("main", "")), verdict_of(data), text(data.get("command")),
                   text(data.get("command_log")))


@dataclass(frozen=True)
class FinalVerdictTaken(Event):
    """Main at the end against main at the start, one paired verdict (none when main did not move)."""

    kind = EventKind.FINAL_VERDICT
    OMITTED = frozenset({"verdict"})
    start: str
    end: str
    moved: bool
    verdict: Verdict | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(str(data["start"]), str(data["end"]), bool(data.get("moved")), verdict_of(data))
