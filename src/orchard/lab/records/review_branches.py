"""What `orchard finalize` made of a lab's wins: review branches, each judged alone, and the best single attempt.

Stored in lab.db (`REVIEW_KEY`) so a second finalize changes nothing (it
finds each branch already made from the same patches on the same start, and
its verdict already taken), and so FINAL_REPORT.md can put the lab's result
beside its best single attempt.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from orchard.lab.records.judgment import Decision, Judgment

REVIEW_KEY = "review"


class ReviewOutcome(StrEnum):
    """What a review branch's own judgment against the starting main says."""

    WINS_ALONE = "wins alone"  # judged LAND again, alone on the starting main
    NO_LONGER_WINS = "no longer wins alone"  # built, judged, not a LAND alone
    DOES_NOT_APPLY = "does not apply"  # a win's change no longer applies to the starting main


@dataclass(frozen=True)
class ReviewBranch:
    """One group of wins whose files overlap, as one branch on the starting main, judged alone against it."""

    branch: str
    wins: tuple[str, ...]  # experiments, in the order the lab merged them
    files: tuple[str, ...]
    start: str  # the lab's starting main: the branch's base
    patches: tuple[str, ...]  # each win's patch sha256: with `start`, what the branch was made from
    commit: str  # the branch's head ("" when it does not apply)
    outcome: ReviewOutcome
    reasons: tuple[str, ...]
    judgment: Judgment | None = None  # the judge's judgment of the whole branch against the starting main
    diff_stat: str = ""

    def made_from(self) -> tuple[str, tuple[str, ...]]:
        return self.start, self.patches

    def to_dict(self) -> dict[str, Any]:
        return {"branch": self.branch, "wins": list(self.wins), "files": list(self.files), "start": self.start,
                "patches": list(self.patches), "commit": self.commit, "outcome": self.outcome,
                "reasons": list(self.reasons), "diff_stat": self.diff_stat,
                "judgment": None if self.judgment is None else self.judgment.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReviewBranch:
        judgment = data.get("judgment")
        return cls(str(data["branch"]), tuple(data["wins"]), tuple(data["files"]), str(data["start"]),
                   tuple(data["patches"]), str(data["commit"]), ReviewOutcome(data["outcome"]),
                   tuple(str(r) for r in data.get("reasons", ())),
                   None if judgment is None else Judgment.from_dict(judgment), str(data.get("diff_stat", "")))


def outcome_of(judgment: Judgment) -> ReviewOutcome:
    return ReviewOutcome.WINS_ALONE if judgment.decision == Decision.LAND else ReviewOutcome.NO_LONGER_WINS


@dataclass(frozen=True)
class BestSingle:
    """The win with the largest confirmed effect on the primary metric, and its judgment alone on the start."""

    metric: str  # the primary metric (`scenario/metric`)
    experiment: str  # "" when no win improved the primary metric in its confirmation
    confirmed: float | None  # its effect in the lab's confirmation verdict
    patch_sha256: str = ""
    judgment: Judgment | None = None  # alone on the starting main (its own review branch's when it has one)

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "experiment": self.experiment, "confirmed": self.confirmed,
                "patch_sha256": self.patch_sha256,
                "judgment": None if self.judgment is None else self.judgment.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BestSingle:
        judgment = data.get("judgment")
        confirmed = data.get("confirmed")
        return cls(str(data["metric"]), str(data.get("experiment", "")),
                   None if confirmed is None else float(confirmed), str(data.get("patch_sha256", "")),
                   None if judgment is None else Judgment.from_dict(judgment))


@dataclass(frozen=True)
class Review:
    """Everything one finalize recorded."""

    start: str
    branches: tuple[ReviewBranch, ...] = ()
    best: BestSingle | None = None

    def to_json(self) -> str:
        return json.dumps({"start": self.start, "branches": [b.to_dict() for b in self.branches],
                           "best": None if self.best is None else self.best.to_dict()}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> Review | None:
        if not text:
            return None
        data = json.loads(text)
        best = data.get("best")
        return cls(str(data["start"]), tuple(ReviewBranch.from_dict(b) for b in data.get("branches", ())),
                   None if best is None else BestSingle.from_dict(best))
