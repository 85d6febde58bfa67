"""A judge host: a dask worker declaring the `judge` resource, where verdicts run with their own numbers.

A judgment made on a judge host names it (`Judgment.judge`): that host holds
the lease on the experiment from then on, and its confirmation, its rebase
verdict and its post-merge check run there too, never elsewhere, since a
verdict's pairs and the baseline it is compared with never span two
machines (`JudgeHost.pinned`: the placement dask is given for them). Each
step's start on a host is journaled (`JudgeStarted`), which is what
`orchard status` and the dashboard show as each judge's queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Self

from orchard.lab.records.events import Event, EventKind

JUDGE_RESOURCE = "judge"  # what a judge host's dask worker declares: `--resources "judge=1"`


class JudgeStep(StrEnum):
    """What a judge host does for an experiment: its verdict, then (a win) its landing's measurements."""

    VERDICT = "verdict"
    REBASE = "rebase"  # main moved: the patch judged again on the new main
    CONFIRM = "confirm"
    MAIN_CHECK = "main-check"


@dataclass(frozen=True)
class JudgeHost:
    """One judge host: its host name and its dask worker's address (what identifies it to the scheduler)."""

    host: str
    address: str

    @property
    def label(self) -> str:
        return f"{self.host} ({self.address})"

    def pinned(self) -> dict[str, Any]:
        """dask's placement for a step leased to this host: here or nowhere (a host that is gone runs nothing)."""
        return {"workers": [self.address], "allow_other_workers": False, "resources": {JUDGE_RESOURCE: 1}}

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "address": self.address}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(str(data.get("host", "")), str(data.get("address", "")))

    @classmethod
    def read(cls, data: Any) -> Self | None:
        """A stored host, or None where an older record (or a local judge) has none."""
        return cls.from_dict(data) if isinstance(data, Mapping) else None


UNPINNED: dict[str, Any] = {"resources": {JUDGE_RESOURCE: 1}}  # a verdict: any judge host with a free slot


@dataclass(frozen=True)
class JudgeStarted(Event):
    """A step of an experiment started on a judge host (again, after `lost_on`, the host it ran on, was lost)."""

    kind = EventKind.JUDGE_HOST
    OMITTED: ClassVar[frozenset[str]] = frozenset({"lost_on"})
    judge: JudgeHost
    step: JudgeStep
    lost_on: JudgeHost | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(JudgeHost.from_dict(data.get("judge") or {}), JudgeStep(data.get("step", JudgeStep.VERDICT)),
                   JudgeHost.read(data.get("lost_on")))


@dataclass(frozen=True)
class JudgeLost(Event):
    """A win's judge host left the cluster before its merge: the win goes back to be judged from scratch."""

    kind = EventKind.JUDGE_LOST
    judge: JudgeHost
    step: JudgeStep  # the landing step that found it gone
    reason: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(JudgeHost.from_dict(data.get("judge") or {}), JudgeStep(data.get("step", JudgeStep.CONFIRM)),
                   str(data.get("reason", "")))
