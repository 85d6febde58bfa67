"""A judgment: the judge's decision on one candidate, with its reasons and evidence.

`Decision` and the hard rules are the vocabulary the journal, the
leaderboard, `orchard status` and the landing steps share; `Judgment` is
what lab.db stores for an experiment once it is judged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from orchard.lab.records.build import BuiltBinary, Check
from orchard.lab.records.verdict import Verdict


class Decision(StrEnum):
    LAND = "LAND"
    KILL = "KILL"
    ITERATE = "ITERATE"


class Rule(StrEnum):
    """The hard rules, by the name their reason strings carry."""

    HARNESS = "harness-untouched"
    SCOPE = "scope-kept"
    TESTS = "tests-green"
    GATES = "gates-absolute"
    FLOOR = "no-claim-below-floor"
    COMPARABLE = "comparable-rows-only"
    TESTS_KEPT = "tests-not-weakened"
    PLAUSIBLE = "implausible-needs-held-out"
    REVIEW = "review-approved"


@dataclass
class Judgment:
    decision: Decision
    reasons: list[str]
    rule: Rule | None = None  # the hard rule that decided, if one did
    checks: list[Check] = field(default_factory=list)
    verdict: Verdict | None = None
    checkout: str | None = None  # judge checkout holding base + patch (kept for LAND)
    binary: str | None = None
    base: str | None = None
    built: BuiltBinary | None = None  # the candidate binary measured, with its hashes
    patch: str = ""  # exactly what was judged: the only change that may land
    patch_sha256: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "reasons": list(self.reasons),
            "rule": self.rule,
            "checks": [check.to_dict() for check in self.checks],
            "verdict": None if self.verdict is None else self.verdict.to_dict(),
            "checkout": self.checkout,
            "binary": self.binary,
            "base": self.base,
            "built": None if self.built is None else self.built.to_dict(),
            "patch": self.patch,
            "patch_sha256": self.patch_sha256,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Judgment:
        verdict = data.get("verdict")
        built = data.get("built")
        return cls(
            decision=Decision(data["decision"]),
            reasons=[str(r) for r in data.get("reasons", [])],
            rule=None if data.get("rule") is None else Rule(data["rule"]),
            checks=[Check.from_dict(c) for c in data.get("checks", [])],
            verdict=None if verdict is None else Verdict.from_dict(verdict),
            checkout=data.get("checkout"),
            binary=data.get("binary"),
            base=data.get("base"),
            built=None if built is None else BuiltBinary.from_dict(built),
            patch=str(data.get("patch") or ""),
            patch_sha256=str(data.get("patch_sha256") or ""),
        )

    def check_lines(self) -> list[str]:
        """One line per check, as the journal lists them."""
        return [f"{c.name}: {'ok' if c.passed else 'FAILED'} {c.detail}" for c in self.checks]


def patch_digest(patch: str) -> str:
    """The sha256 a judged patch is stored with, and checked against before it lands."""
    return hashlib.sha256(patch.encode("utf-8", errors="surrogateescape")).hexdigest()


@dataclass(frozen=True)
class JudgmentEntry:
    """The journal's entry for a judgment: the hypothesis as it was tried, and what came of it."""

    hypothesis: str
    title: str
    decision: Decision
    reasons: list[str]
    metric: str = ""
    predicted: str = "-"
    cause: str = ""
    rule: Rule | None = None
    verdict: Verdict | None = None
    checks: list[str] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    sandbox: str = "bwrap"  # how the worker was confined ([workers] sandbox)

    def to_dict(self) -> dict[str, Any]:
        return {"hypothesis": self.hypothesis, "title": self.title, "metric": self.metric,
                "predicted": self.predicted, "cause": self.cause, "decision": self.decision,
                "reasons": list(self.reasons), "rule": self.rule,
                "verdict": None if self.verdict is None else self.verdict.to_dict(), "checks": list(self.checks),
                "usage": self.usage, "sandbox": self.sandbox}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JudgmentEntry:
        verdict = data.get("verdict")
        return cls(
            hypothesis=str(data["hypothesis"]), title=str(data.get("title", "")), decision=Decision(data["decision"]),
            reasons=[str(r) for r in data.get("reasons", [])], metric=str(data.get("metric") or ""),
            predicted=str(data.get("predicted") or "-"), cause=str(data.get("cause") or "-"),
            rule=None if data.get("rule") is None else Rule(data["rule"]),
            verdict=None if verdict is None else Verdict.from_dict(verdict),
            checks=[str(c) for c in data.get("checks", [])], usage=data.get("usage"),
            sandbox=str(data.get("sandbox") or "bwrap"),
        )
