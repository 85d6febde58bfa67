"""A person steering a running lab: one experiment stopped, the lab paused and resumed, its limits changed.

Each is an event with who asked (`by`), so the journal says who steered the lab, and lab.db holds what a lab
started again must still honour: a pause outlives a restart, a stop asked for is carried out by whichever run
sees it first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from orchard.lab.records.events import Event, EventKind


@dataclass(frozen=True)
class StopAsked(Event):
    """A person asked to stop one experiment's worker: its hypothesis back to the backlog (`requeue`) or KILLed."""

    kind = EventKind.STOP_ASKED
    requeue: bool
    by: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(bool(data.get("requeue", True)), str(data.get("by", "?")))

    def describe(self) -> str:
        return (f"{self.by} asked to stop this worker, its hypothesis "
                + ("back to the backlog." if self.requeue else "KILLed."))


@dataclass(frozen=True)
class ExperimentStopped(Event):
    """The lab stopped the worker a person asked it to: never judged; where its hypothesis went."""

    kind = EventKind.STOPPED
    hypothesis: str
    requeued: bool
    by: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(str(data["hypothesis"]), bool(data.get("requeued", True)), str(data.get("by", "?")))

    def describe(self) -> str:
        return (f"The lab stopped this worker, as {self.by} asked: never judged; hypothesis {self.hypothesis} "
                + ("went back to the backlog." if self.requeued else "was KILLed."))


@dataclass(frozen=True)
class Paused(Event):
    """A person paused the lab: it starts no new worker; the running ones finish and are judged."""

    kind = EventKind.PAUSE
    by: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(str(data.get("by", "?")))

    def describe(self) -> str:
        return f"Paused by {self.by}: no new workers; the running ones finish and are judged."


@dataclass(frozen=True)
class LimitChanged:
    """One `[stop]` key of orchard.toml changed on resume: its value before and after."""

    key: str
    before: float
    after: float

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "before": self.before, "after": self.after}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LimitChanged:
        return cls(str(data["key"]), float(data["before"]), float(data["after"]))

    def describe(self) -> str:
        return f"stop.{self.key} {self.before:g} -> {self.after:g}"


@dataclass(frozen=True)
class Resumed(Event):
    """A person resumed the lab (or changed its limits): new workers start again, under orchard.toml's `[stop]`."""

    kind = EventKind.RESUME
    by: str
    limits: tuple[LimitChanged, ...] = ()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(str(data.get("by", "?")), tuple(LimitChanged.from_dict(c) for c in data.get("limits", ())))

    def describe(self) -> str:
        return f"Resumed by {self.by}" + (": " + "; ".join(c.describe() for c in self.limits) if self.limits
                                          else ".")
