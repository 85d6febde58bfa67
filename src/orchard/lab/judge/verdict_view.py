"""A verdict as the lab shows it: typed once from the stored document, formatted once.

JOURNAL.md, LEADERBOARD.md, FINAL_REPORT.md, report.html, the dashboard and
its charts print every number through the one formatter of its kind here
(`pct` an effect, `interval`, `floor_pct`, `measured` a metric's value,
`short_commit`, `score_text`; units from `orchard.units`, `run_of` how far a verdict got), so a
number reads the same, to the digit, wherever it appears.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchard.lab.judge.measuring import Method, MetricResult, Verdict, is_held_out
from orchard.lab.text import inline
from orchard.units import count, exact_quantity, quantity

COLUMNS = ("metric", "verdict", "effect", "interval", "floor", "n", "MDE", "baseline", "candidate")


def run_of(verdict: VerdictView) -> str:
    """How far a verdict got and its seed: `after 20 pairs (seed 7)`."""
    seed = "-" if verdict.seed is None else verdict.seed
    return f"{after_pairs(verdict.pairs)} (seed {seed})"


def after_pairs(pairs: Any) -> str:
    """How far a verdict got: a gate that fails in the warm-up pair ends it before any counted pair."""
    if pairs == 0:
        return "after the warm-up pair (a gate failed before any counted pair)"
    return f"after {num(pairs)} pairs"


def pct(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:+.2%}"


def interval(low: float | None, high: float | None) -> str:
    return f"[{pct(low)}, {pct(high)}]"


def floor_pct(value: float | None) -> str:
    """A noise floor, a share of the baseline: `5.00%`."""
    return "-" if value is None else f"{value:.2%}"


def short_commit(sha: str | None) -> str:
    """A commit as every page names it: its first ten hex digits."""
    return (sha or "-")[:10]


def score_text(value: float) -> str:
    """A hypothesis's backlog score."""
    return f"{value:.2f}"


def num(value: Any) -> str:
    """A count or plain number as people read it: 290,600, not 2.906e+05 (nor 290600 in another table)."""
    return count(value) if isinstance(value, (int, float)) else "-" if value is None else str(value)


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
    held_out: bool = False  # a scenario only the judge runs (workers never saw its inputs)

    @classmethod
    def from_metric(cls, m: MetricResult) -> MetricEffect:
        low, high = m.interval or (None, None)
        return cls(key=m.key, verdict=m.verdict, effect=m.effect, low=low, high=high, floor=m.floor, n=m.n,
                   mde=m.mde, baseline=m.baseline_median, candidate=m.candidate_median, exact=m.method == Method.EXACT,
                   held_out=is_held_out(m))


@dataclass(frozen=True)
class GateView:
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
    gates: tuple[GateView, ...]
    advice: tuple[str, ...] = ()  # one line per timing metric too noisy for what matters: what to measure instead
    variants: str = ""  # the held-out variants made for it, how the win fared on them, or why none were made

    @classmethod
    def from_verdict(cls, verdict: Verdict | None) -> VerdictView | None:
        if verdict is None:
            return None
        return cls(verdict=verdict.verdict, pairs=verdict.pairs, seed=verdict.seed, lock_wait_ms=verdict.lock_wait_ms,
                   reasons=tuple(verdict.reasons), metrics=tuple(MetricEffect.from_metric(m) for m in verdict.metrics),
                   gates=tuple(GateView(g.name, g.passed, g.detail) for g in verdict.gates),
                   advice=tuple(advice.line() for advice in verdict.advice),
                   variants="" if verdict.variants is None else verdict.variants.line())

    @classmethod
    def from_document(cls, data: Mapping[str, Any] | None) -> VerdictView | None:
        """From a verdict as an event in lab.db stores it."""
        return cls.from_verdict(Verdict.from_dict(data)) if data else None


def effect_cells(best: MetricEffect | None, final: MetricEffect | None) -> list[str]:
    """A leaderboard row's numbers: the best change's paired effect, main against the start, the floor."""
    def effect(m: MetricEffect | None) -> str:
        return "-" if m is None else f"{pct(m.effect)} {interval(m.low, m.high)}"

    shown = final or best
    return [effect(best), effect(final), "-" if shown is None else floor_pct(shown.floor)]


def measured(m: MetricEffect, value: float | None) -> str:
    """A metric's measured value: in full when it is deterministic (no noise to round away)."""
    return exact_quantity(value, m.key) if m.exact else quantity(value, m.key)


def cells(m: MetricEffect) -> list[str]:
    """One metric's row of a verdict table, in `COLUMNS` order."""
    key = f"{m.key} (held-out)" if m.held_out else m.key
    return [key, m.verdict, pct(m.effect), interval(m.low, m.high), floor_pct(m.floor), str(m.n),
            pct(m.mde).lstrip("+"), measured(m, m.baseline), measured(m, m.candidate)]


def markdown_table(verdict: VerdictView | None) -> list[str]:
    """A verdict as Markdown: one table row per metric, then its gates and advice (JOURNAL.md, FINAL_REPORT.md)."""
    if verdict is None:
        return []
    lines = ["| " + " | ".join(COLUMNS) + " |", "|---|---|---:|---|---:|---:|---:|---:|---:|"]
    lines += ["| " + " | ".join(cells(m)) + " |" for m in verdict.metrics]
    lines += [f"\ngate `{g.name}`: {'pass' if g.passed else 'FAIL'} ({inline(g.detail)})" for g in verdict.gates]
    lines += [f"\n{inline(verdict.variants)}"] if verdict.variants else []
    # advice is the bench's own Markdown (the lab's suite's metric names and alternatives in code spans)
    return lines + [f"\nadvice: {advice}" for advice in verdict.advice]


def markdown_head(verdict: VerdictView) -> str:
    return f"**{verdict.verdict}** {run_of(verdict)}"
