"""A verdict as the lab shows it: typed once from the stored document, formatted once.

JOURNAL.md, FINAL_REPORT.md, report.html, the dashboard and its charts all
print verdicts through `cells`, `pct` and `num`, so a number reads the same,
to the digit, wherever it appears.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

COLUMNS = ("metric", "verdict", "effect", "interval", "floor", "n", "MDE", "baseline", "candidate")


def pct(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:+.2%}"


def num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def exact(value: float | None) -> str:
    """A deterministic metric's value in full (11502, not 1.15e+04): it has no noise to round away."""
    return "-" if value is None else f"{value:.12g}"


@dataclass(frozen=True)
class MetricEffect:
    """One metric of one verdict: the candidate against its baseline, relative."""

    key: str
    verdict: str
    effect: float | None
    low: float | None
    high: float | None
    floor: float
    n: int
    mde: float | None
    baseline: float | None
    candidate: float | None
    exact: bool  # a deterministic metric: compared exactly, no interval

    @classmethod
    def from_verdict_metric(cls, data: Mapping[str, Any]) -> MetricEffect:
        low, high = data.get("interval") or (None, None)
        return cls(key=data["key"], verdict=data["verdict"], effect=data.get("effect"), low=low, high=high,
                   floor=float(data.get("floor") or 0.0), n=int(data.get("n") or 0), mde=data.get("mde"),
                   baseline=data.get("baseline_median"), candidate=data.get("candidate_median"),
                   exact=data.get("method") == "exact")


@dataclass(frozen=True)
class Gate:
    name: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class VerdictView:
    verdict: str
    pairs: int | None
    seed: int | None
    lock_wait_ms: float
    reasons: tuple[str, ...]
    metrics: tuple[MetricEffect, ...]
    gates: tuple[Gate, ...]

    @classmethod
    def from_document(cls, data: Mapping[str, Any] | None) -> VerdictView | None:
        if not data:
            return None
        return cls(verdict=str(data.get("verdict")), pairs=data.get("pairs"), seed=data.get("seed"),
                   lock_wait_ms=float(data.get("lock_wait_ms") or 0.0), reasons=tuple(data.get("reasons", [])),
                   metrics=tuple(MetricEffect.from_verdict_metric(m) for m in data.get("metrics", [])),
                   gates=tuple(Gate(g["name"], bool(g["passed"]), g.get("detail", "")) for g in data.get("gates", [])))


def cells(m: MetricEffect) -> list[str]:
    """One metric's row of a verdict table, in `COLUMNS` order."""
    return [m.key, m.verdict, pct(m.effect), f"[{pct(m.low)}, {pct(m.high)}]", f"{m.floor:.2%}", str(m.n),
            pct(m.mde).lstrip("+"), num(m.baseline), num(m.candidate)]
