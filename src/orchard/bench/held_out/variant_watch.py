"""Judging held-out variants (`variants.py`) inside a verdict: the baseline is the oracle.

Outputs, in every pair: where the candidate's output on the bench scenario is
the baseline's, its output on each variant must be the baseline's on that
variant too. Where it changes the bench's output (a shorter report, on
purpose), the baseline's answer is no oracle for the candidate's; then, where
the baseline answers the variant exactly as it answers the bench input, the
candidate must too (a renamed input is the same input). A difference fails the
gate "held-out variant", so the verdict is REGRESSED. The scenario's own gates
(exit status, determinism, and on a renamed input its facts) apply as well.

Effects, once the verdict is PASS: every target metric improved on a bench
scenario must show on each variant of it. Each variant's metric is judged
like the verdict's own (paired, the origin's calibrated noise, Holm across
the variants' metrics at the suite's alpha); the win does not hold when the
variant's interval lies entirely short of half the bench's improvement (on
the log scale: sqrt of the bench's ratio). A special case keyed on the bench
input falls back to the ordinary code on a variant and shows there as no
change; an honest win shows about as large, and half leaves room for inputs
that exercise the code a little differently. The verdict is then REGRESSED
with the reason "the win does not hold on inputs the worker never saw",
naming the variant.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Mapping, Sequence
from pathlib import Path

from orchard.bench.deciding.decide import decide_metrics
from orchard.bench.deciding.variant_report import WIN_NOT_HELD, VariantCheck, VariantReport
from orchard.bench.deciding.verdict import (
    Direction,
    GateResult,
    MetricNoise,
    MetricResult,
    MetricVerdict,
    VerdictDecision,
    VerdictWord,
)
from orchard.bench.held_out.variants import Variant, make_variants, runnable, with_variants
from orchard.bench.measuring.measure import Observation, Workbench
from orchard.bench.suites.suite import Suite

GATE = "held-out variant"


def _half(effect: float) -> float:
    """Half of a relative effect on the log scale: (1 + e) ** 0.5 - 1."""
    return math.sqrt(1.0 + effect) - 1.0 if effect > -1.0 else -1.0


def holds(win: MetricResult, variant: MetricResult) -> bool:
    """Whether the variant's interval reaches half the bench's improvement on the same metric."""
    assert win.effect is not None
    half = _half(win.effect)
    low, high = variant.interval or ((variant.effect, variant.effect) if variant.effect is not None else
                                     (-math.inf, math.inf))
    return low <= half if win.direction == Direction.LOWER else high >= half


def disagreement(variant: Variant, bench: tuple[Observation, Observation],
                 varied: tuple[Observation, Observation]) -> str | None:
    """Why the candidate's output on a variant is wrong in one pair, or None (also when no output is compared)."""
    (bench_base, bench_cand), (base, cand) = bench, varied
    digests = (bench_base.output_digest, bench_cand.output_digest, base.output_digest, cand.output_digest)
    if None in digests or not cand.ok:
        return None  # a failed run is the exit status gate's
    where = f"{variant.name} ({variant.perturbation} of {variant.source})"
    if bench_base.output_digest == bench_cand.output_digest:
        if cand.output_digest != base.output_digest:
            return f"{where}: the candidate's output differs from the baseline's, while on the bench it is the same"
    elif base.output_digest == bench_base.output_digest and cand.output_digest != bench_cand.output_digest:
        return f"{where}: the baseline answers it as it answers the bench input, the candidate does not"
    return None


class VariantWatch:
    """One candidate's variants through its campaign: outputs checked pair by pair, metrics kept for the end."""

    def __init__(self, suite: Suite, variants: Sequence[Variant], notes: Sequence[str], seed: int) -> None:
        self.origin_suite, self.suite = suite, with_variants(suite, variants)  # the bench's; what the campaign runs
        self.variants, self.notes, self.seed = list(variants), tuple(notes), seed
        self.specs = [dataclasses.replace(spec, scenario=v.name, target=False)
                      for v in variants for spec in suite.metrics if spec.scenario == v.origin]
        self.origin_key = {spec.key: f"{v.origin}/{spec.metric}" for v in variants
                           for spec in self.specs if spec.scenario == v.name}
        self.values: dict[str, tuple[list[float | None], list[float | None]]] = {s.key: ([], []) for s in self.specs}

    def again(self) -> VariantWatch:
        """A watch of the same variants for another candidate of a shared campaign."""
        return VariantWatch(self.origin_suite, self.variants, self.notes, self.seed)

    def pair(self, warmup: bool, pairs: Sequence[tuple[Observation, Observation]]) -> list[GateResult]:
        """One pair's variant checks (failed ones); its values kept unless it is the warm-up."""
        seen = {base.scenario: (base, cand) for base, cand in pairs}
        failed = []
        for variant in self.variants:
            if variant.name not in seen:
                continue
            base, cand = seen[variant.name]
            for spec in self.specs:
                if spec.scenario == variant.name and not warmup:
                    self.values[spec.key][0].append(base.values.get(spec.metric))
                    self.values[spec.key][1].append(cand.values.get(spec.metric))
            why = None if variant.origin not in seen else disagreement(variant, seen[variant.origin], (base, cand))
            if why is not None:
                failed.append(GateResult(GATE, False, why))
        return failed

    def _results(self, noise: Mapping[str, MetricNoise], alpha: float) -> dict[str, MetricResult]:
        complete = [s for s in self.specs if self.values[s.key][0]
                    and None not in self.values[s.key][0] + self.values[s.key][1]]
        values = {s.key: _floats(*self.values[s.key]) for s in complete}
        known = [s for s in complete if self.origin_key[s.key] in noise]
        return {m.key: m for m in decide_metrics(known, values, {s.key: noise[self.origin_key[s.key]]
                                                                  for s in known}, alpha)}

    def judge(self, decision: VerdictDecision, noise: Mapping[str, MetricNoise],
              alpha: float) -> tuple[VerdictDecision, VariantReport]:
        """The decision, REGRESSED when a PASS's win does not hold on a variant, and the variants' report."""
        wins = [m for m in decision.metrics if m.target and m.verdict == MetricVerdict.IMPROVED
                and m.effect is not None] if decision.verdict == VerdictWord.PASS else []
        results = self._results(noise, alpha) if wins else {}
        checks = []
        for variant in self.variants:
            mine = [(w, results.get(f"{variant.name}/{w.metric}")) for w in wins if w.scenario == variant.origin]
            held = None if not mine else all(r is not None and holds(w, r) for w, r in mine)
            detail = "; ".join(f"{w.metric} {w.effect:+.1%} on the bench, {_shown(r)} here" for w, r in mine)
            checks.append(VariantCheck(variant.name, variant.origin, variant.perturbation, variant.source, held,
                                       detail))
        report = VariantReport(self.seed, tuple(checks), self.notes)
        failed = [c for c in checks if c.held is False]
        if failed:
            reason = f"{WIN_NOT_HELD}: " + "; ".join(f"{c.scenario} ({c.perturbation} of {c.source}): {c.detail}"
                                                     for c in failed)
            decision = dataclasses.replace(decision, verdict=VerdictWord.REGRESSED,
                                           reasons=[reason, *decision.reasons])
        return decision, report


def _floats(baseline: list[float | None], candidate: list[float | None]) -> tuple[list[float], list[float]]:
    return [float(v) for v in baseline if v is not None], [float(v) for v in candidate if v is not None]


def _shown(result: MetricResult | None) -> str:
    """A variant's effect and interval, as the reason states them."""
    if result is None or result.effect is None:
        return "unmeasured"
    low, high = result.interval or (math.nan, math.nan)
    return f"{result.effect:+.1%} [{low:+.1%}, {high:+.1%}]"


def watch_variants(suite: Suite, bench: Workbench, baseline: Path) -> VariantWatch:
    """A verdict's variants, made now under a fresh seed in its workbench (`bench`, of `suite`), those the
    baseline fails on left out, and a watch of them for one candidate."""
    seed = random.SystemRandom().randrange(1, 2**31)
    made, notes = make_variants(bench, seed)
    kept, left_out = runnable(bench, made, baseline)
    return VariantWatch(suite, kept, [*notes, *left_out], seed)
