"""A judgment: the judge's decision on one candidate, with its reasons and evidence.

`Decision` and the hard rules are the vocabulary the journal, the
leaderboard, `orchard status` and the landing steps share; `Judgment` is
what lab.db stores for an experiment once it is judged, built once from the
rules' `Ruling` and the evidence; `JudgmentEntry` is the journal's event for it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Self

from orchard.lab.records.agent_usage import AgentUsage
from orchard.lab.records.build import BuiltBinary, Check
from orchard.lab.records.events import Event, EventKind, texts
from orchard.lab.records.hack_findings import Finding
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.records.judge_host import JudgeHost
from orchard.lab.records.measured_events import verdict_of
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
    HACK_REVIEW = "no-benchmark-gaming"
    DIFFERENTIAL = "same-output-beyond-the-bench"
    ADMISSIBLE = "change-admissible"  # a refused change: special or binary files, over the patch limits
    AS_BUILT = "binaries-as-built"  # a binary the judge built changed while it was measured
    OPEN_TREE = "open-to-the-sandbox"  # a build left its tree closed to the sandbox uid that measures it


@dataclass(frozen=True)
class Ruling:
    """What the hard rules decided, before it is written into a `Judgment` with its evidence."""

    decision: Decision
    reasons: tuple[str, ...]
    rule: Rule | None = None  # the hard rule that decided, if one did


@dataclass(frozen=True)
class Judgment:
    """The judge's decision on one candidate with its evidence, built once when the judge is done."""

    decision: Decision
    reasons: tuple[str, ...]
    rule: Rule | None = None  # the hard rule that decided, if one did
    checks: tuple[Check, ...] = ()
    verdict: Verdict | None = None
    checkout: str | None = None  # judge checkout holding base + patch (kept for LAND)
    binary: str | None = None
    base: str | None = None
    built: BuiltBinary | None = None  # the candidate binary measured, with its hashes
    patch: str = ""  # exactly what was judged: the only change that may land
    patch_sha256: str = ""
    build_s: float = 0.0  # seconds the judge spent building and testing it
    measure_s: float = 0.0  # seconds its verdict took (lock waits included)
    judge: JudgeHost | None = None  # the judge host that judged it (None: the lab's own machine)
    findings: tuple[Finding, ...] = ()  # the hack review's; a LAND with findings is held for a person

    @property
    def held(self) -> bool:
        """A win the hack review doubted: it waits for a person (`orchard review`) instead of landing."""
        return self.decision == Decision.LAND and bool(self.findings)

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
            # timed since this wave: a judgment an older orchard journaled reads back as it was written
            **({"build_s": self.build_s, "measure_s": self.measure_s} if self.build_s or self.measure_s else {}),
            **({} if self.judge is None else {"judge": self.judge.to_dict()}),
            **({"findings": [f.to_dict() for f in self.findings]} if self.findings else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Judgment:
        verdict = data.get("verdict")
        built = data.get("built")
        return cls(
            decision=Decision(data["decision"]),
            reasons=tuple(str(r) for r in data.get("reasons", [])),
            rule=None if data.get("rule") is None else Rule(data["rule"]),
            checks=tuple(Check.from_dict(c) for c in data.get("checks", [])),
            verdict=None if verdict is None else Verdict.from_dict(verdict),
            checkout=data.get("checkout"),
            binary=data.get("binary"),
            base=data.get("base"),
            built=None if built is None else BuiltBinary.from_dict(built),
            patch=str(data.get("patch") or ""),
            patch_sha256=str(data.get("patch_sha256") or ""),
            build_s=float(data.get("build_s") or 0.0),
            measure_s=float(data.get("measure_s") or 0.0),
            judge=JudgeHost.read(data.get("judge")),
            findings=tuple(Finding.from_dict(f) for f in data.get("findings") or ()),
        )

    def check_lines(self) -> list[str]:
        """One line per check, as the journal lists them."""
        return [f"{c.name}: {'ok' if c.passed else 'FAILED'} {c.detail}" for c in self.checks]


def patch_digest(patch: str) -> str:
    """The sha256 a judged patch is stored with, and checked against before it lands."""
    return hashlib.sha256(patch.encode("utf-8", errors="surrogateescape")).hexdigest()


@dataclass(frozen=True)
class JudgmentEntry(Event):
    """The journal's entry for a judgment: the hypothesis as it was tried, and what came of it.

    `patch_sha256` names the patch judged: landing refuses a LAND no entry of this patch backs.
    """

    kind = EventKind.JUDGMENT
    OMITTED = frozenset({"held"})
    hypothesis: str
    title: str
    decision: Decision
    reasons: tuple[str, ...]
    metric: str = ""
    predicted: str = "-"
    cause: str = ""
    rule: Rule | None = None
    verdict: Verdict | None = None
    checks: tuple[str, ...] = ()
    usage: AgentUsage | None = None
    sandbox: str = "bwrap"  # how the worker was confined ([workers] sandbox)
    patch_sha256: str = ""
    held: tuple[str, ...] | None = None  # a held win's findings: it lands only after `orchard review --land`

    @property
    def measured(self) -> Verdict | None:
        return self.verdict

    @classmethod
    def of(cls, judgment: Judgment, hypothesis: Hypothesis, usage: AgentUsage | None, sandbox: str) -> Self:
        """The entry for a judgment of this hypothesis, with what its worker's agent spent."""
        return cls(hypothesis=hypothesis.id, title=hypothesis.title, decision=judgment.decision,
                   reasons=judgment.reasons, metric=hypothesis.metric, predicted=hypothesis.predicted_text,
                   cause=hypothesis.suspected_cause, rule=judgment.rule, verdict=judgment.verdict,
                   checks=tuple(judgment.check_lines()), usage=usage, sandbox=sandbox,
                   patch_sha256=judgment.patch_sha256,
                   held=tuple(f.describe() for f in judgment.findings) if judgment.held else None)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        usage = data.get("usage")
        return cls(
            hypothesis=str(data["hypothesis"]), title=str(data.get("title", "")), decision=Decision(data["decision"]),
            reasons=texts(data.get("reasons")), metric=str(data.get("metric") or ""),
            predicted=str(data.get("predicted") or "-"), cause=str(data.get("cause") or "-"),
            rule=None if data.get("rule") is None else Rule(data["rule"]), verdict=verdict_of(data),
            checks=texts(data.get("checks")), usage=AgentUsage.from_dict(usage) if isinstance(usage, Mapping) else None,
            sandbox=str(data.get("sandbox") or "bwrap"), patch_sha256=str(data.get("patch_sha256") or ""),
            held=texts(data["held"]) if data.get("held") else None,
        )
