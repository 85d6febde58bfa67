"""The decision rule: paired differences per metric, their Hodges-Lehmann estimate and exact interval against
the noise floor, Holm's correction over several metrics, the adaptive campaign's looks, and the overall verdict
(gates first), and the advice when a timing metric is too noisy for what matters. The records it decides into
are in `verdict.py` and `noise_advice.py`."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from orchard.bench.deciding import stats
from orchard.bench.deciding.noise_advice import CPU, CPU_BOUND, INSTRUCTIONS, WALL, Alternative, NoiseAdvice
from orchard.bench.deciding.spread import Spread
from orchard.bench.deciding.verdict import (
    DEFAULT_ALPHA,
    GateResult,
    Method,
    MetricNoise,
    MetricResult,
    MetricSpec,
    MetricVerdict,
    Scale,
    VerdictDecision,
    VerdictWord,
)


def _to_relative(scale: Scale, value: float) -> float:
    return math.expm1(value) if scale == Scale.LOG_RATIO else value


def _from_relative(scale: Scale, value: float) -> float:
    return math.log1p(value) if scale == Scale.LOG_RATIO else value


def paired_differences(baseline: stats.Values, candidate: stats.Values) -> tuple[Scale, np.ndarray]:
    """Per-pair differences on the best scale the data allows."""
    a = np.asarray(baseline, dtype=float)
    b = np.asarray(candidate, dtype=float)
    if np.all(a > 0) and np.all(b > 0):
        return Scale.LOG_RATIO, np.log(b / a)
    scale = float(np.median(np.abs(a)))
    if scale > 0:
        return Scale.RELATIVE, (b - a) / scale
    return Scale.ABSOLUTE, b - a


EXTRA_SHARE = 0.5  # of alpha, kept for the extra looks when a campaign may go on past `runs`
REACH_SE = 1.0  # an open metric is within reach if a change this many standard errors beyond its estimate would clear


@dataclass(frozen=True)
class AdaptivePlan:
    """When an adaptive campaign may stop, and at what level each look tests.

    Looks are geometric (x1.5) from `min_runs`; a step that would land within
    25% of `max_runs` goes straight there, so the last look is worth taking.
    Alpha is split over the looks with weights growing as the cube of the
    sample fraction (an O'Brien-Fleming-like shape: early looks stop only on
    overwhelming evidence, most of alpha is kept for the last look). The
    parts sum to alpha, so by Bonferroni the campaign keeps its error rate.

    With `extra_runs`, a campaign whose metric is still open at `max_runs`
    (`open_metrics`) may go on to `max_runs + extra_runs` pairs, looking again
    on the same geometric steps. Those extra looks are planned from the start:
    `EXTRA_SHARE` of alpha is theirs (cube-weighted among them), the regular
    looks share the rest as before, so every look together still spends alpha.
    """

    min_runs: int
    max_runs: int
    alpha: float = DEFAULT_ALPHA
    extra_runs: int = 0

    @property
    def looks(self) -> list[int]:
        """The regular looks, up to `max_runs`."""
        return _geometric(min(self.min_runs, self.max_runs), self.max_runs)

    @property
    def extra_looks(self) -> list[int]:
        """The looks past `max_runs`, taken only while some metric is open."""
        return _geometric(self.max_runs, self.last)[1:] if self.extra_runs > 0 else []

    @property
    def last(self) -> int:
        return self.max_runs + max(0, self.extra_runs)

    def alpha_at(self, n: int) -> float | None:
        """The level of the look at n pairs, or None if n is not a look."""
        share = EXTRA_SHARE if self.extra_looks else 0.0
        for points, part in ((self.looks, 1.0 - share), (self.extra_looks, share)):
            if n in points:
                weights = [(p / points[-1]) ** 3 for p in points]
                return self.alpha * part * weights[points.index(n)] / sum(weights)
        return None

    def stops(self, n: int, metrics: Sequence[MetricResult]) -> bool:
        """Whether the campaign stops after its look at n pairs: settled, past `max_runs` with nothing open, or at
        its last pair."""
        return settled(metrics) or n >= self.last or (n >= self.max_runs and not open_metrics(metrics, self.last))


def _geometric(start: int, end: int) -> list[int]:
    """Look points from `start` to `end`, x1.5 each, straight to `end` from within 25% of it."""
    points = [start]
    while points[-1] < end:
        step = math.ceil(points[-1] * 1.5)
        points.append(end if step * 1.25 > end else step)
    return points


def classify(low: float, high: float, floor: float, matters: float) -> MetricVerdict:
    """Classify an interval on the bad-is-positive scale: changes clear the floor, no change stays within `matters`."""
    if low > floor:
        return MetricVerdict.REGRESSED
    if high < -floor:
        return MetricVerdict.IMPROVED
    if low >= -matters and high <= matters:
        return MetricVerdict.UNCHANGED
    return MetricVerdict.UNCLEAR


def _wide_floor_note(result: MetricResult, matters: float) -> str:
    """Why an unclear interval inside the noise floor is no NO-CHANGE: the floor is wider than what matters."""
    low, high = result.interval or (-math.inf, math.inf)
    if result.verdict == MetricVerdict.UNCLEAR and -result.floor <= low and high <= result.floor:
        return (f"within the noise floor {result.floor:.2%} but not within {matters:.2%}, "
                "the smallest change that matters")
    return result.note


def _claim_p(bad: np.ndarray, floor: float, matters: float) -> float:
    """Smallest p-value among the three claims (regressed, improved, unchanged)."""
    p_regressed = stats.signed_rank_p_greater(bad, floor)
    p_improved = stats.signed_rank_p_greater(-bad, floor)
    p_unchanged = max(
        stats.signed_rank_p_greater(bad, -matters), stats.signed_rank_p_greater(-bad, -matters)
    )
    return min(p_regressed, p_improved, p_unchanged)


def _result(spec: MetricSpec, a: np.ndarray, b: np.ndarray, **fields: Any) -> MetricResult:
    """A metric's result, with the spec's own fields and both sides' medians and spreads filled in."""
    return MetricResult(scenario=spec.scenario, metric=spec.metric, direction=spec.direction, target=spec.target,
                        baseline_median=float(np.median(a)) if len(a) else None, baseline_spread=Spread.of(a),
                        candidate_median=float(np.median(b)) if len(b) else None, candidate_spread=Spread.of(b),
                        **fields)


def _exact_result(spec: MetricSpec, a: np.ndarray, b: np.ndarray) -> MetricResult:
    scale, d = paired_differences(a[:1], b[:1])
    effect = _to_relative(scale, float(d[0]))
    if abs(effect) <= spec.min_floor:
        verdict = MetricVerdict.UNCHANGED
    else:
        verdict = MetricVerdict.REGRESSED if spec.bad_sign * effect > 0 else MetricVerdict.IMPROVED
    return _result(spec, a, b, verdict=verdict, method=Method.EXACT, scale=scale, effect=effect,
                   interval=(effect, effect), confidence=1.0, floor=spec.min_floor, n=len(a), mde=0.0)


def decide_metrics(specs: Sequence[MetricSpec], samples: Mapping[str, tuple[Sequence[float], Sequence[float]]],
                   noise: Mapping[str, MetricNoise], alpha: float) -> list[MetricResult]:
    """Judge every metric from its paired samples (baseline, candidate).

    `alpha` is this look's false-claim rate, both directions together: a claim either way (regressed or
    improved) is tested one-sided at half of it, so the two together spend it. Holm splits it between the
    metrics that need statistics (exact ones carry no error probability).
    """
    results: dict[str, MetricResult] = {}
    statistical: list[tuple[MetricSpec, Scale, np.ndarray, float]] = []
    for spec in specs:
        a = np.asarray(samples[spec.key][0], dtype=float)
        b = np.asarray(samples[spec.key][1], dtype=float)
        cal = noise[spec.key]
        if cal.deterministic and len(set(a.tolist())) == 1 and len(set(b.tolist())) == 1:
            results[spec.key] = _exact_result(spec, a, b)
            continue
        scale, d = paired_differences(a, b)
        bad = spec.bad_sign * d
        statistical.append((spec, scale, bad, _from_relative(scale, spec.floor(cal))))
        results[spec.key] = _result(
            spec, a, b, verdict=MetricVerdict.UNCLEAR, method=Method.HODGES_LEHMANN, scale=scale, effect=None,
            interval=None, confidence=None, floor=spec.floor(cal), n=len(d), mde=None,
            note="deterministic in A/A but varies here" if cal.deterministic else "",
        )
    p_values = [_claim_p(bad, floor_scaled, _from_relative(scale, spec.matters))
                for spec, scale, bad, floor_scaled in statistical]
    levels = stats.holm_levels(p_values, alpha / 2.0)
    for (spec, scale, bad, floor_scaled), p, level in zip(statistical, p_values, levels, strict=True):
        results[spec.key] = _tested(results[spec.key], (spec, scale, bad, floor_scaled), p, level)
    return [results[spec.key] for spec in specs]


def _tested(unclear: MetricResult, tested: tuple[MetricSpec, Scale, np.ndarray, float], p: float,
            level: float) -> MetricResult:
    """A metric judged by statistics: its Hodges-Lehmann interval at its Holm `level`, as a relative effect."""
    spec, scale, bad, floor_scaled = tested
    interval = stats.hl_interval(bad, 1.0 - 2.0 * level)
    estimate = stats.hodges_lehmann(bad) if len(bad) else math.nan
    # back to the candidate-vs-baseline orientation for display
    low, high = sorted((spec.bad_sign * interval.low, spec.bad_sign * interval.high))
    mde = stats.minimum_detectable_effect(stats.robust_sd(bad), len(bad), level, floor_scaled)
    judged = replace(
        unclear,
        verdict=classify(interval.low, interval.high, floor_scaled, _from_relative(scale, spec.matters)),
        effect=_to_relative(scale, spec.bad_sign * estimate),
        interval=(_to_relative(scale, low), _to_relative(scale, high)),
        confidence=interval.confidence if math.isfinite(interval.low) else 1.0 - 2.0 * level, p_value=p,
        mde=_to_relative(scale, mde) if math.isfinite(mde) else mde,
    )
    return replace(judged, note=_wide_floor_note(judged, spec.matters))


def decide_unpaired(
    specs: Sequence[MetricSpec],
    samples: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    alpha: float,
) -> list[MetricResult]:
    """Judge metrics of two samples that are not paired (no A/A calibration: the suite floors).

    Metrics constant on both sides compare exactly; the others get the
    two-sample Hodges-Lehmann shift on log values, Bonferroni over metrics.
    `alpha` counts both directions together, as in `decide_metrics`.
    """
    results = []
    varying = [spec for spec in specs if len(set(samples[spec.key][0])) > 1 or len(set(samples[spec.key][1])) > 1]
    level = alpha / 2.0 / max(1, len(varying))
    for spec in specs:
        a = np.asarray(samples[spec.key][0], dtype=float)
        b = np.asarray(samples[spec.key][1], dtype=float)
        if spec not in varying:
            results.append(_exact_result(spec, a, b))
            continue
        if np.all(a > 0) and np.all(b > 0):
            scale, x, y = Scale.LOG_RATIO, np.log(a), np.log(b)
        else:  # differences relative to the baseline's typical size, as paired_differences does
            unit = float(np.median(np.abs(a))) or 1.0
            scale, x, y = Scale.RELATIVE, a / unit, b / unit
        estimate, interval = stats.shift_interval(x, y, 1.0 - 2.0 * level)
        sign = spec.bad_sign
        floor = _from_relative(scale, spec.min_floor)
        low, high = sorted((sign * interval.low, sign * interval.high))
        verdict = classify(low, high, floor, _from_relative(scale, spec.matters))
        results.append(_result(
            spec, a, b, verdict=verdict, method=Method.UNPAIRED, scale=scale,
            effect=_to_relative(scale, estimate), interval=(_to_relative(scale, interval.low),
                                                            _to_relative(scale, interval.high)),
            confidence=interval.confidence, floor=spec.min_floor, n=min(len(a), len(b)), mde=None,
            note="unpaired: the two sets' runs do not line up",
        ))
    return results


def overall(metrics: Sequence[MetricResult], gates: Sequence[GateResult]) -> VerdictDecision:
    """Combine metric verdicts and gates into PASS / NO-CHANGE / INCONCLUSIVE / REGRESSED."""
    reasons: list[str] = []
    failed_gates = [gate for gate in gates if not gate.passed]
    regressed = [m for m in metrics if m.verdict == MetricVerdict.REGRESSED]
    for gate in failed_gates:
        reasons.append(f"gate {gate.name} failed: {gate.detail}")
    for metric in regressed:
        reasons.append(f"{metric.key} regressed by {metric.effect:+.2%} (floor {metric.floor:.2%})")
    if failed_gates or regressed:
        return VerdictDecision(VerdictWord.REGRESSED, list(metrics), list(gates), reasons)
    improved = [m for m in metrics if m.verdict == MetricVerdict.IMPROVED and m.target]
    if improved:
        reasons += [f"{m.key} improved by {m.effect:+.2%} beyond floor {m.floor:.2%}" for m in improved]
        return VerdictDecision(VerdictWord.PASS, list(metrics), list(gates), reasons)
    unclear = [m for m in metrics if m.verdict == MetricVerdict.UNCLEAR]
    if unclear:
        reasons += [f"{m.key} inconclusive at n={m.n}" + (f" (MDE {m.mde:.2%})" if m.mde is not None else "")
                    + (f": {m.note}" if m.note else "") for m in unclear]
        return VerdictDecision(VerdictWord.INCONCLUSIVE, list(metrics), list(gates), reasons)
    reasons.append("every metric within its noise floor and the smallest change that matters")
    return VerdictDecision(VerdictWord.NO_CHANGE, list(metrics), list(gates), reasons)


def settled(metrics: Sequence[MetricResult]) -> bool:
    """An adaptive campaign may stop: something regressed or nothing is unclear."""
    return any(m.verdict == MetricVerdict.REGRESSED for m in metrics) or all(
        m.verdict != MetricVerdict.UNCLEAR for m in metrics
    )


def open_metrics(metrics: Sequence[MetricResult], last: int) -> list[str]:
    """Why a campaign at the end of its regular looks goes on to `last` pairs: each metric neither settled nor
    hopeless.

    Open means inconclusive with its estimate beyond the floor while its interval still straddles the floor,
    and within reach: were the change one standard error larger than its estimate, the interval's side
    towards the floor, narrowed as sqrt(n / last), would clear it by `last`. An estimate inside the floor,
    or too far from clearing it for the pairs left, is hopeless: more pairs would not settle it (a null
    effect on a loud machine, whose estimate wanders a few percent beyond a small floor). Nothing is open
    once the campaign is settled.
    """
    if settled(metrics):
        return []
    return [f"{m.key}: estimate {m.effect:+.2%} beyond its floor {m.floor:.2%}, interval "
            f"[{low:+.2%}, {high:+.2%}] straddling it"
            for m in metrics if _within_reach(m, last) for low, high in [m.interval or (math.nan, math.nan)]]


def _within_reach(m: MetricResult, last: int) -> bool:
    if m.verdict != MetricVerdict.UNCLEAR or m.method != Method.HODGES_LEHMANN or m.effect is None \
            or m.interval is None or abs(m.effect) <= m.floor:
        return False
    towards_floor = m.effect - m.interval[0] if m.effect > 0 else m.interval[1] - m.effect
    standard_error = towards_floor / stats.z(1.0 - (1.0 - (m.confidence or 0.9)) / 2.0)
    return abs(m.effect) + REACH_SE * standard_error - towards_floor * math.sqrt(m.n / last) > m.floor


def extension_note(pairs: int, runs: int, why: Sequence[str]) -> list[str]:
    """The verdict's line for a campaign that went on past `runs` (how many pairs it took, and why); none if it
    did not."""
    return [f"measured {pairs} pairs, past runs = {runs}, because " + "; ".join(why)] if why else []


def _width(metric: MetricResult) -> float:
    """How small a change this metric can see: its MDE when one was computed, never below its floor."""
    mde = metric.mde if metric.mde is not None and math.isfinite(metric.mde) else 0.0
    return max(metric.floor, mde)


def advise(specs: Sequence[MetricSpec], metrics: Sequence[MetricResult], cpu_share: Mapping[str, float],
           can_count: Callable[[], bool]) -> tuple[NoiseAdvice, ...]:
    """Advice for each inconclusive timing metric too noisy for the smallest change that matters.

    `cpu_share` is the baseline's cpu_ms over its wall_ms per scenario, where both were measured;
    `can_count` says whether instructions can be counted here (asked only when some metric needs advice).
    """
    by_key = {spec.key: spec for spec in specs}
    advice = []
    for m in metrics:
        spec = by_key.get(m.key)
        if (spec is None or m.metric not in (WALL, CPU) or m.verdict != MetricVerdict.UNCLEAR
                or m.method != Method.HODGES_LEHMANN or _width(m) <= spec.matters):
            continue
        alternatives = []
        if m.metric == WALL and f"{m.scenario}/{CPU}" not in by_key and cpu_share.get(m.scenario, 0.0) >= CPU_BOUND:
            alternatives.append(Alternative.CPU_MS)
        if f"{m.scenario}/{INSTRUCTIONS}" not in by_key and can_count():
            alternatives.append(Alternative.INSTRUCTIONS)
        advice.append(NoiseAdvice(m.key, _width(m), spec.matters, tuple(alternatives)))
    return tuple(advice)
