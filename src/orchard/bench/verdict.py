"""The verdict: did the candidate really change each metric, or is it noise?

Per metric, the paired differences between candidate and baseline (log-ratios
when values are positive) get a Hodges-Lehmann estimate and an exact
interval. With the metric's noise floor d from A/A calibration:

- regressed   the interval lies beyond +d on the bad side
- improved    the interval lies beyond d on the good side
- no-change   the interval lies inside [-d, +d]
- inconclusive otherwise, with the minimum detectable effect at this n

Metrics whose A/A runs never varied compare exactly. Several metrics are
corrected with Holm's procedure; the looks of an adaptive campaign share
alpha between them (most of it kept for the last). Gates come first: a failed gate is
REGRESSED whatever the metrics say.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np

from orchard.bench import stats


class VerdictWord(StrEnum):
    """A candidate's overall verdict against its baseline (ERROR: nothing could be compared)."""

    PASS = "PASS"
    NO_CHANGE = "NO-CHANGE"
    INCONCLUSIVE = "INCONCLUSIVE"
    REGRESSED = "REGRESSED"
    ERROR = "ERROR"


class MetricVerdict(StrEnum):
    """One metric's verdict: where its interval lies against the noise floor."""

    IMPROVED = "improved"
    REGRESSED = "regressed"
    UNCHANGED = "no-change"
    UNCLEAR = "inconclusive"


VERDICT_SCHEMA = "orchard.verdict/1"  # the id of Verdict.to_dict, the `--json` document
DEFAULT_ALPHA = 0.05  # one-sided, per claim; intervals are two-sided at 1 - 2 alpha


@dataclass(frozen=True)
class MetricSpec:
    """What the suite says about one metric of one scenario."""

    scenario: str
    metric: str
    direction: str  # "lower" or "higher" is better
    min_floor: float = 0.0  # relative; the floor is never below this
    target: bool = True  # an improvement here can make the verdict PASS

    @property
    def key(self) -> str:
        return f"{self.scenario}/{self.metric}"

    @property
    def bad_sign(self) -> float:
        """+1 when a larger value is worse, -1 when it is better."""
        return 1.0 if self.direction == "lower" else -1.0

    def floor(self, noise: MetricNoise) -> float:
        """The floor claims must clear: the calibrated one, never below the suite's minimum."""
        return max(self.min_floor, noise.floor)


@dataclass(frozen=True)
class MetricNoise:
    """What A/A calibration learned about one metric on this machine."""

    floor: float  # relative effect size below which nothing is claimed
    deterministic: bool  # no A/A variation at all
    sd: float  # robust SD of A/A paired differences (relative scale)


@dataclass
class MetricResult:
    scenario: str
    metric: str
    direction: str
    target: bool
    verdict: MetricVerdict
    method: str  # "hodges-lehmann" or "exact"
    scale: str  # "log-ratio", "relative" or "absolute"
    effect: float | None  # candidate vs baseline, relative (0.05 = 5% larger)
    interval: tuple[float, float] | None
    confidence: float | None
    floor: float
    n: int
    mde: float | None
    baseline_median: float | None
    candidate_median: float | None
    p_value: float | None = None
    note: str = ""

    @property
    def key(self) -> str:
        return f"{self.scenario}/{self.metric}"

    def to_json(self) -> dict[str, Any]:
        """Effects as fractions (0.05), as percentages (5.0) and, on the log scale, as log-ratios."""
        data = asdict(self)
        data["key"] = self.key
        for name in ("effect", "mde"):
            if data[name] is not None and not math.isfinite(data[name]):
                data[name] = None
        if data["interval"] is not None:
            data["interval"] = [None if not math.isfinite(v) else v for v in data["interval"]]
        data["effect_percent"] = _percent(data["effect"])
        data["interval_percent"] = None if data["interval"] is None else [_percent(v) for v in data["interval"]]
        data["floor_percent"] = _percent(self.floor)
        data["mde_percent"] = _percent(data["mde"])
        log_scale = self.scale == "log-ratio"
        data["effect_log_ratio"] = _log_ratio(data["effect"]) if log_scale else None
        data["interval_log_ratio"] = (
            [_log_ratio(v) for v in data["interval"]] if log_scale and data["interval"] is not None else None
        )
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MetricResult:
        """The inverse of `to_json` (an unbounded interval end comes back as infinity)."""
        interval = data.get("interval")
        return cls(
            scenario=str(data["scenario"]), metric=str(data["metric"]), direction=str(data["direction"]),
            target=bool(data.get("target", True)), verdict=MetricVerdict(data["verdict"]),
            method=str(data.get("method", "")), scale=str(data.get("scale", "")), effect=data.get("effect"),
            interval=None if interval is None else (
                -math.inf if interval[0] is None else float(interval[0]),
                math.inf if interval[1] is None else float(interval[1])),
            confidence=data.get("confidence"), floor=float(data.get("floor", 0.0)), n=int(data.get("n", 0)),
            mde=data.get("mde"), baseline_median=data.get("baseline_median"),
            candidate_median=data.get("candidate_median"), p_value=data.get("p_value"),
            note=str(data.get("note", "")),
        )


def _percent(fraction: float | None) -> float | None:
    return None if fraction is None or not math.isfinite(fraction) else round(100.0 * fraction, 6)


def _log_ratio(fraction: float | None) -> float | None:
    return None if fraction is None or fraction <= -1.0 else math.log1p(fraction)


@dataclass
class GateResult:
    name: str
    passed: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "detail": self.detail}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GateResult:
        return cls(str(data["name"]), bool(data["passed"]), str(data.get("detail", "")))


@dataclass
class VerdictDecision:
    verdict: VerdictWord
    metrics: list[MetricResult] = field(default_factory=list)
    gates: list[GateResult] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)


def _to_relative(scale: str, value: float) -> float:
    return math.expm1(value) if scale == "log-ratio" else value


def _from_relative(scale: str, value: float) -> float:
    return math.log1p(value) if scale == "log-ratio" else value


def paired_differences(baseline: stats.Values, candidate: stats.Values) -> tuple[str, np.ndarray]:
    """Per-pair differences on the best scale the data allows."""
    a = np.asarray(baseline, dtype=float)
    b = np.asarray(candidate, dtype=float)
    if np.all(a > 0) and np.all(b > 0):
        return "log-ratio", np.log(b / a)
    scale = float(np.median(np.abs(a)))
    if scale > 0:
        return "relative", (b - a) / scale
    return "absolute", b - a


@dataclass(frozen=True)
class AdaptivePlan:
    """When an adaptive campaign may stop, and at what level each look tests.

    Looks are geometric (x1.5) from `min_runs`; a step that would land within
    25% of `max_runs` goes straight there, so the last look is worth taking.
    Alpha is split over the looks with weights growing as the cube of the
    sample fraction (an O'Brien-Fleming-like shape: early looks stop only on
    overwhelming evidence, most of alpha is kept for the last look). The
    parts sum to alpha, so by Bonferroni the campaign keeps its error rate.
    """

    min_runs: int
    max_runs: int
    alpha: float = DEFAULT_ALPHA

    @property
    def looks(self) -> list[int]:
        points = [min(self.min_runs, self.max_runs)]
        while points[-1] < self.max_runs:
            step = math.ceil(points[-1] * 1.5)
            points.append(self.max_runs if step * 1.25 > self.max_runs else step)
        return points

    def alpha_at(self, n: int) -> float | None:
        """The level of the look at n pairs, or None if n is not a look."""
        points = self.looks
        if n not in points:
            return None
        weights = [(p / points[-1]) ** 3 for p in points]
        return self.alpha * weights[points.index(n)] / sum(weights)


def _classify(low: float, high: float, floor: float) -> MetricVerdict:
    """Classify an interval on the bad-is-positive scale."""
    if low > floor:
        return MetricVerdict.REGRESSED
    if high < -floor:
        return MetricVerdict.IMPROVED
    if low >= -floor and high <= floor:
        return MetricVerdict.UNCHANGED
    return MetricVerdict.UNCLEAR


def _claim_p(bad: np.ndarray, floor: float) -> float:
    """Smallest p-value among the three claims (regressed, improved, unchanged)."""
    p_regressed = stats.signed_rank_p_greater(bad, floor)
    p_improved = stats.signed_rank_p_greater(-bad, floor)
    p_unchanged = max(
        stats.signed_rank_p_greater(bad, -floor), stats.signed_rank_p_greater(-bad, -floor)
    )
    return min(p_regressed, p_improved, p_unchanged)


def _result(spec: MetricSpec, **fields: Any) -> MetricResult:
    """A metric's result, with the spec's own fields filled in."""
    return MetricResult(scenario=spec.scenario, metric=spec.metric, direction=spec.direction,
                        target=spec.target, **fields)


def _exact_result(spec: MetricSpec, a: np.ndarray, b: np.ndarray) -> MetricResult:
    scale, d = paired_differences(a[:1], b[:1])
    effect = _to_relative(scale, float(d[0]))
    if abs(effect) <= spec.min_floor:
        verdict = MetricVerdict.UNCHANGED
    else:
        verdict = MetricVerdict.REGRESSED if spec.bad_sign * effect > 0 else MetricVerdict.IMPROVED
    return _result(spec, verdict=verdict, method="exact", scale=scale, effect=effect, interval=(effect, effect),
                   confidence=1.0, floor=spec.min_floor, n=len(a), mde=0.0, baseline_median=float(a[0]),
                   candidate_median=float(b[0]))


def decide_metrics(
    specs: Sequence[MetricSpec],
    samples: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    noise: Mapping[str, MetricNoise],
    alpha: float,
) -> list[MetricResult]:
    """Judge every metric from its paired samples (baseline, candidate).

    `alpha` is the one-sided level for this look; Holm splits it between the
    metrics that need statistics (exact ones carry no error probability).
    """
    results: dict[str, MetricResult] = {}
    statistical: list[tuple[MetricSpec, str, np.ndarray, float]] = []
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
            spec, verdict=MetricVerdict.UNCLEAR, method="hodges-lehmann", scale=scale, effect=None, interval=None,
            confidence=None, floor=spec.floor(cal), n=len(d), mde=None,
            baseline_median=float(np.median(a)) if len(a) else None,
            candidate_median=float(np.median(b)) if len(b) else None,
            note="deterministic in A/A but varies here" if cal.deterministic else "",
        )
    p_values = [_claim_p(bad, floor_scaled) for _, _, bad, floor_scaled in statistical]
    levels = stats.holm_levels(p_values, alpha)
    for (spec, scale, bad, floor_scaled), p, level in zip(statistical, p_values, levels, strict=True):
        result = results[spec.key]
        sign = spec.bad_sign
        interval = stats.hl_interval(bad, 1.0 - 2.0 * level)
        result.verdict = _classify(interval.low, interval.high, floor_scaled)
        estimate = stats.hodges_lehmann(bad) if len(bad) else math.nan
        # back to the candidate-vs-baseline orientation for display
        low, high = sorted((sign * interval.low, sign * interval.high))
        result.effect = _to_relative(scale, sign * estimate)
        result.interval = (_to_relative(scale, low), _to_relative(scale, high))
        result.confidence = interval.confidence if math.isfinite(interval.low) else 1.0 - 2.0 * level
        result.p_value = p
        sd = stats.robust_sd(bad)
        result.mde = stats.minimum_detectable_effect(sd, len(bad), level, floor_scaled)
        if math.isfinite(result.mde):
            result.mde = _to_relative(scale, result.mde)
    return [results[spec.key] for spec in specs]


def decide_unpaired(
    specs: Sequence[MetricSpec],
    samples: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    alpha: float,
) -> list[MetricResult]:
    """Judge metrics of two samples that are not paired (no A/A calibration: the suite floors).

    Metrics constant on both sides compare exactly; the others get the
    two-sample Hodges-Lehmann shift on log values, Bonferroni over metrics.
    """
    results = []
    varying = [spec for spec in specs if len(set(samples[spec.key][0])) > 1 or len(set(samples[spec.key][1])) > 1]
    level = alpha / max(1, len(varying))
    for spec in specs:
        a = np.asarray(samples[spec.key][0], dtype=float)
        b = np.asarray(samples[spec.key][1], dtype=float)
        if spec not in varying:
            results.append(_exact_result(spec, a, b))
            continue
        if np.all(a > 0) and np.all(b > 0):
            scale, x, y = "log-ratio", np.log(a), np.log(b)
        else:  # differences relative to the baseline's typical size, as paired_differences does
            unit = float(np.median(np.abs(a))) or 1.0
            scale, x, y = "relative", a / unit, b / unit
        estimate, interval = stats.shift_interval(x, y, 1.0 - 2.0 * level)
        sign = spec.bad_sign
        floor = _from_relative(scale, spec.min_floor)
        low, high = sorted((sign * interval.low, sign * interval.high))
        verdict = _classify(low, high, floor)
        results.append(_result(
            spec, verdict=verdict, method="hodges-lehmann-unpaired", scale=scale,
            effect=_to_relative(scale, estimate), interval=(_to_relative(scale, interval.low),
                                                            _to_relative(scale, interval.high)),
            confidence=interval.confidence, floor=spec.min_floor, n=min(len(a), len(b)), mde=None,
            baseline_median=float(np.median(a)), candidate_median=float(np.median(b)),
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
        reasons += [f"{m.key} inconclusive at n={m.n} (MDE {m.mde:.2%})" for m in unclear if m.mde is not None]
        return VerdictDecision(VerdictWord.INCONCLUSIVE, list(metrics), list(gates), reasons)
    reasons.append("every metric within its noise floor")
    return VerdictDecision(VerdictWord.NO_CHANGE, list(metrics), list(gates), reasons)


def settled(metrics: Sequence[MetricResult]) -> bool:
    """An adaptive campaign may stop: something regressed or nothing is unclear."""
    return any(m.verdict == MetricVerdict.REGRESSED for m in metrics) or all(
        m.verdict != MetricVerdict.UNCLEAR for m in metrics
    )


@dataclass(frozen=True)
class CalibrationNote:
    """Which calibration a verdict used: enough to judge how far to trust its floors."""

    cached: bool
    age_s: float
    runs: int
    seed: int
    machine_fingerprint: str
    file: str | None = None  # the calibration file it came from, when one was named

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CalibrationNote:
        return cls(bool(data["cached"]), float(data["age_s"]), int(data["runs"]), int(data["seed"]),
                   str(data["machine_fingerprint"]), data.get("file"))


@dataclass(frozen=True)
class ExternalRun:
    """A verdict taken by a bench's own verdict script rather than a suite: what ran, how it ended."""

    command: str
    exit_code: int | None
    output_tail: str


@dataclass
class Verdict:
    """A candidate's verdict against its baseline, with everything needed to read it again later.

    The one record `orchard verdict --json` prints, the lab stores and every
    display reads; `to_dict` is that JSON (the fields of an external run are
    added only when there was one).
    """

    verdict: VerdictWord
    reasons: list[str]
    baseline: Path
    candidate: Path
    metrics: list[MetricResult] = field(default_factory=list)
    gates: list[GateResult] = field(default_factory=list)
    suite: str | None = None
    seed: int | None = None
    pairs: int | None = None
    planned_pairs: int | None = None
    calibration: CalibrationNote | None = None
    warnings: list[str] = field(default_factory=list)
    lock_wait_ms: float = 0.0
    rows: Path | None = None
    summary: Path | None = None
    external: ExternalRun | None = None

    @property
    def failed_gates(self) -> list[GateResult]:
        return [gate for gate in self.gates if not gate.passed]

    def medians(self) -> tuple[dict[str, float | None], dict[str, float | None]]:
        """(baseline medians, candidate medians) per metric key."""
        return ({m.key: m.baseline_median for m in self.metrics}, {m.key: m.candidate_median for m in self.metrics})

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "schema": VERDICT_SCHEMA,
            "verdict": self.verdict,
            "reasons": list(self.reasons),
            "suite": self.suite,
            "baseline": str(self.baseline),
            "candidate": str(self.candidate),
            "seed": self.seed,
            "pairs": self.pairs,
            "planned_pairs": self.planned_pairs,
            "calibration": None if self.calibration is None else self.calibration.to_dict(),
            "metrics": [m.to_json() for m in self.metrics],
            "gates": [g.to_dict() for g in self.gates],
            "warnings": list(self.warnings),
            "lock_wait_ms": round(self.lock_wait_ms, 3),
            "rows": None if self.rows is None else str(self.rows),
            "summary": None if self.summary is None else str(self.summary),
        }
        if self.external is not None:
            data |= {"source": "command", "command": self.external.command, "exit_code": self.external.exit_code,
                     "output_tail": self.external.output_tail}
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        def path(key: str) -> Path | None:
            return None if data.get(key) is None else Path(data[key])

        calibration = data.get("calibration")
        external = None
        if data.get("source") == "command":
            external = ExternalRun(str(data.get("command", "")), data.get("exit_code"),
                                   str(data.get("output_tail", "")))
        return cls(
            verdict=VerdictWord(data["verdict"]),
            reasons=[str(r) for r in data.get("reasons", [])],
            baseline=Path(data.get("baseline", "")),
            candidate=Path(data.get("candidate", "")),
            metrics=[MetricResult.from_dict(m) for m in data.get("metrics", [])],
            gates=[GateResult.from_dict(g) for g in data.get("gates", [])],
            suite=data.get("suite"),
            seed=data.get("seed"),
            pairs=data.get("pairs"),
            planned_pairs=data.get("planned_pairs"),
            calibration=None if calibration is None else CalibrationNote.from_dict(calibration),
            warnings=[str(w) for w in data.get("warnings", [])],
            lock_wait_ms=float(data.get("lock_wait_ms") or 0.0),
            rows=path("rows"),
            summary=path("summary"),
            external=external,
        )
