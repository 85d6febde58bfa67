"""Landing's steps, in their order, and the frozen record each step leaves in the journal.

`land` does each step once: its record is journaled the moment it is done,
and a resumed landing reads the records back (typed) and goes on at the first
step without one. Nothing reaches the user's repository before the
confirmation passed: the branch is pushed after `CONFIRM`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Self

from orchard.lab.records.events import Event, EventKind, text, texts
from orchard.lab.records.judge_host import JudgeHost
from orchard.lab.records.judgment import Decision, Judgment
from orchard.lab.records.measured_events import verdict_of
from orchard.lab.records.verdict import Verdict


class LandStep(StrEnum):
    """The steps, in the order a landing takes them (the last two only after a combined regression)."""

    LAND = EventKind.LAND.value
    REBASE = EventKind.REBASE.value
    CONFIRM = EventKind.CONFIRM.value
    PUSH = EventKind.PUSH.value
    MERGE = EventKind.MERGE.value
    PUBLISH = EventKind.PUBLISH.value
    MAIN_CHECK = EventKind.MAIN_CHECK.value
    REVERT = EventKind.REVERT.value
    PUBLISH_REVERT = EventKind.PUBLISH_REVERT.value


@dataclass(frozen=True)
class Committed(Event):
    """`land`: the judged patch committed on its described branch in the lab's clone."""

    kind = EventKind.LAND
    branch: str
    commit: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(str(data["branch"]), str(data["commit"]))


@dataclass(frozen=True)
class Rebased(Event):
    """`rebase`: main at landing, and when it had moved, the judgment again on it and the branch made there."""

    kind = EventKind.REBASE
    OMITTED = frozenset({"onto", "decision", "reasons", "judgment"})
    needed: bool
    main: str
    branch: str
    commit: str
    onto: str | None = None
    decision: Decision | None = None
    reasons: tuple[str, ...] | None = None
    judgment: Judgment | None = None

    @property
    def lands(self) -> bool:
        """Whether what lands still lands on main (always when main had not moved)."""
        return self.decision in (None, Decision.LAND)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        judgment, decision = data.get("judgment"), data.get("decision")
        return cls(bool(data["needed"]), str(data["main"]), str(data["branch"]), str(data["commit"]),
                   text(data.get("onto")), None if decision is None else Decision(decision),
                   None if data.get("reasons") is None else texts(data["reasons"]),
                   None if judgment is None else Judgment.from_dict(judgment))


@dataclass(frozen=True)
class Confirmed(Event):
    """`confirm`: the confirmation verdict of exactly what lands, or why there is none; `by` names a verdict taken
    before that stands for it (the judgment on a moved main, at the rebase) instead of a new one."""

    kind = EventKind.CONFIRM
    OMITTED = frozenset({"refused", "verdict", "judge", "by"})
    refused: str | None = None
    verdict: Verdict | None = None
    judge: JudgeHost | None = None  # the judge host it ran on: the one that judged the win (None: this machine)
    by: str | None = None

    @property
    def measured(self) -> Verdict | None:
        return self.verdict

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(text(data.get("refused")), verdict_of(data), JudgeHost.read(data.get("judge")), text(data.get("by")))


@dataclass(frozen=True)
class Pushed(Event):
    """A branch pushed from the lab's clone to the target repository, and whether it reads back there."""

    OMITTED = frozenset({"error"})
    branch: str
    commit: str
    reachable: bool
    error: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(str(data["branch"]), str(data["commit"]), bool(data.get("reachable")), text(data.get("error")))


@dataclass(frozen=True)
class BranchPushed(Pushed):
    """`push`: the experiment's branch, published once the confirmation passed."""

    kind = EventKind.PUSH


@dataclass(frozen=True)
class MainPublished(Pushed):
    """`publish`: the lab's main after the merge."""

    kind = EventKind.PUBLISH


@dataclass(frozen=True)
class RevertPublished(Pushed):
    """`publish-revert`: the lab's main after a revert."""

    kind = EventKind.PUBLISH_REVERT


@dataclass(frozen=True)
class Merged(Event):
    """`merge`: the branch merged into the lab's main (or found merged after a restart)."""

    kind = EventKind.MERGE
    OMITTED = frozenset({"note"})
    branch: str
    into: str
    commit: str
    previous: str
    note: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(str(data["branch"]), str(data["into"]), str(data["commit"]), str(data.get("previous", "")),
                   text(data.get("note")))


@dataclass(frozen=True)
class MainChecked(Event):
    """`main-check`: main after the merge against the previous main."""

    kind = EventKind.MAIN_CHECK
    OMITTED = frozenset({"judge"})
    verdict: Verdict | None
    regressed: bool
    before: dict[str, float | None] = field(default_factory=dict)
    judge: JudgeHost | None = None  # the judge host it ran on (None: this machine)

    @property
    def measured(self) -> Verdict | None:
        return self.verdict

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(verdict_of(data), bool(data.get("regressed")), dict(data.get("before") or {}),
                   JudgeHost.read(data.get("judge")))


@dataclass(frozen=True)
class Reverted(Event):
    """`revert`: the merge reverted after a combined regression, and the verdict word that caused it."""

    kind = EventKind.REVERT
    merge: str
    revert: str
    verdict: str
    why: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(str(data["merge"]), str(data["revert"]), str(data.get("verdict", "")), str(data.get("why", "")))

