"""The verdict's vocabulary and records: did the candidate really change each metric, or is it noise?
The rule described below is applied in `decide.py`; this module holds what it decides into.

Per metric, the paired differences between candidate and baseline (log-ratios when values are positive) get a
Hodges-Lehmann estimate and an exact interval. With the metric's noise floor d from A/A calibration:

- regressed   the interval lies beyond +d on the bad side
- improved    the interval lies beyond d on the good side
- no-change   the interval lies inside [-t, +t], t the smallest change that matters (the suite's
              `no_change_within`, 1% by default, or the metric's own floor if larger): "no change that
              matters", never merely "nothing beyond a wide floor"
- inconclusive otherwise, with the minimum detectable effect at this n

Metrics whose A/A runs never varied compare exactly. Several metrics are corrected with Holm's procedure; the
looks of an adaptive campaign share alpha between them (most of it kept for the last). Gates come first: a
failed gate is REGRESSED whatever the metrics say.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from orchard.bench.deciding.noise_advice import NoiseAdvice
from orchard.bench.deciding.spread import Spread
from orchard.bench.deciding.variant_report import VariantReport


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


class Unjudged(StrEnum):
    """Why a verdict is ERROR: what kept the candidate from being compared at all."""

    BASELINE_FAILED = "baseline-failed"  # a scenario, its calibration or a gate failed for the baseline
    INCOMPARABLE_ROWS = "incomparable-rows"  # a harness's rows differ in a comparability key
    COMMAND_FAILED = "command-failed"  # a bench's own verdict script failed yet printed PASS


class Direction(StrEnum):
    """Which way a metric is better."""

    LOWER = "lower"
    HIGHER = "higher"

    def gain(self, change: float) -> float:
        """`change` (candidate minus baseline, in any unit) signed so that positive is better."""
        return -change if self is Direction.LOWER else change

    def better(self, value: float, than: float) -> bool:
        return value < than if self is Direction.LOWER else value > than


class Method(StrEnum):
    """How a metric's verdict was reached (UNSTATED: a bench's own verdict script did not say)."""

    HODGES_LEHMANN = "hodges-lehmann"
    UNPAIRED = "hodges-lehmann-unpaired"
    EXACT = "exact"
    COUNTED = "counted-per-binary"  # a few instruction counts of each binary, within the A/A spread
    UNSTATED = ""


class Scale(StrEnum):
    """What a metric's paired differences were taken on: the best the values allow (UNSTATED as for `Method`)."""

    LOG_RATIO = "log-ratio"
    RELATIVE = "relative"  # to the baseline's median size: some values are not positive
    ABSOLUTE = "absolute"  # the baseline's median is zero
    UNSTATED = ""


VERDICT_SCHEMA = "orchard.verdict/1"  # the id of Verdict.to_dict, the `--json` document
DEFAULT_ALPHA = 0.05  # false claims per verdict, both directions: each claim one-sided at half; intervals at 1 - alpha
DEFAULT_NO_CHANGE_WITHIN = 0.01  # the smallest relative change that matters, unless a suite says otherwise


@dataclass(frozen=True)
class MetricSpec:
    """What the suite says about one metric of one scenario."""

    scenario: str
    metric: str
    direction: Direction
    min_floor: float = 0.0  # relative; the floor is never below this
    target: bool = True  # an improvement here can make the verdict PASS
    no_change_within: float = DEFAULT_NO_CHANGE_WITHIN  # the suite's threshold of interest

    @property
    def matters(self) -> float:
        """The smallest change that matters: NO-CHANGE is claimed only for intervals inside +-this."""
        return max(self.min_floor, self.no_change_within)

    @property
    def key(self) -> str:
        return f"{self.scenario}/{self.metric}"

    @property
    def bad_sign(self) -> float:
        """+1 when a larger value is worse, -1 when it is better."""
        return -self.direction.gain(1.0)

    def floor(self, noise: MetricNoise) -> float:
        """The floor claims must clear: the calibrated one, never below the suite's minimum."""
        return max(self.min_floor, noise.floor)


@dataclass(frozen=True)
class MetricNoise:
    """What A/A calibration learned about one metric on this machine."""

    floor: float  # relative effect size below which nothing is claimed
    deterministic: bool  # no A/A variation at all
    sd: float  # robust SD of A/A paired differences (relative scale)


@dataclass(frozen=True)
class MetricResult:
    scenario: str
    metric: str
    direction: Direction
    target: bool
    verdict: MetricVerdict
    method: Method
    scale: Scale
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
    baseline_spread: Spread | None = None  # None: not known (a bench's own verdict script, an older verdict)
    candidate_spread: Spread | None = None

    @property
    def key(self) -> str:
        return f"{self.scenario}/{self.metric}"

    def to_json(self) -> dict[str, Any]:
        """Effects as fractions (0.05), as percentages (5.0) and, on the log scale, as log-ratios; the spreads
        only when known, so an older verdict reads back byte-identical."""
        data = {name: value for name, value in asdict(self).items() if value is not None or "spread" not in name}
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
        log_scale = self.scale == Scale.LOG_RATIO
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
            scenario=str(data["scenario"]), metric=str(data["metric"]), direction=Direction(data["direction"]),
            target=bool(data.get("target", True)), verdict=MetricVerdict(data["verdict"]),
            method=Method(data.get("method", "")), scale=Scale(data.get("scale", "")), effect=data.get("effect"),
            interval=None if interval is None else (
                -math.inf if interval[0] is None else float(interval[0]),
                math.inf if interval[1] is None else float(interval[1])),
            confidence=data.get("confidence"), floor=float(data.get("floor", 0.0)), n=int(data.get("n", 0)),
            mde=data.get("mde"), baseline_median=data.get("baseline_median"),
            candidate_median=data.get("candidate_median"), p_value=data.get("p_value"),
            note=str(data.get("note", "")), baseline_spread=Spread.from_dict(data.get("baseline_spread")),
            candidate_spread=Spread.from_dict(data.get("candidate_spread")),
        )


def _percent(fraction: float | None) -> float | None:
    return None if fraction is None or not math.isfinite(fraction) else round(100.0 * fraction, 6)


def _log_ratio(fraction: float | None) -> float | None:
    return None if fraction is None or fraction <= -1.0 else math.log1p(fraction)


@dataclass(frozen=True)
class GateResult:
    name: str
    passed: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GateResult:
        return cls(str(data["name"]), bool(data["passed"]), str(data.get("detail", "")))


@dataclass(frozen=True)
class VerdictDecision:
    verdict: VerdictWord
    metrics: list[MetricResult] = field(default_factory=list)
    gates: list[GateResult] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    unjudged: Unjudged | None = None  # set exactly when the verdict is ERROR


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


@dataclass(frozen=True)
class Verdict:
    """A candidate's verdict against its baseline, with everything needed to read it again later: the one record
    `orchard verdict --json` prints, the lab stores and every display reads; `to_dict` is that JSON (the fields of
    an external run, a confinement or advice are added only when there is one)."""

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
    # Why an ERROR could not compare, for the lab's rules in the same process. Not in `to_dict`: the --json
    # document's form is fixed, and its reasons say it in words.
    unjudged: Unjudged | None = None
    confinement: str | None = None  # how the measured runs were confined, in one line
    advice: tuple[NoiseAdvice, ...] = ()  # timing metrics too noisy for what matters, and what to measure instead
    variants: VariantReport | None = None  # the held-out variants made for it and how the win fared on them

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
        data |= {} if self.confinement is None else {"confinement": self.confinement}  # only when runs were confined
        if self.advice:  # only when given, so older verdicts read back byte-identical
            data["advice"] = [a.to_dict() for a in self.advice]
        data |= {} if self.variants is None else {"variants": self.variants.to_dict()}  # said when variants ran
        if self.external is not None:
            data |= {"source": "command", "command": self.external.command, "exit_code": self.external.exit_code,
                     "output_tail": self.external.output_tail}
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        def path(key: str) -> Path | None:
            return None if data.get(key) is None else Path(data[key])
        calibration = data.get("calibration")
        external = None if data.get("source") != "command" else ExternalRun(
            str(data.get("command", "")), data.get("exit_code"), str(data.get("output_tail", "")))
        return cls(
            verdict=VerdictWord(data["verdict"]), reasons=[str(r) for r in data.get("reasons", [])],
            baseline=Path(data.get("baseline", "")), candidate=Path(data.get("candidate", "")),
            metrics=[MetricResult.from_dict(m) for m in data.get("metrics", [])],
            gates=[GateResult.from_dict(g) for g in data.get("gates", [])],
            suite=data.get("suite"), seed=data.get("seed"), pairs=data.get("pairs"),
            planned_pairs=data.get("planned_pairs"),
            calibration=None if calibration is None else CalibrationNote.from_dict(calibration),
            warnings=[str(w) for w in data.get("warnings", [])],
            lock_wait_ms=float(data.get("lock_wait_ms") or 0.0),
            rows=path("rows"), summary=path("summary"), external=external,
            confinement=data.get("confinement"),
            advice=tuple(NoiseAdvice.from_dict(a) for a in data.get("advice", [])),
            variants=VariantReport.from_dict(data["variants"]) if data.get("variants") else None,
        )
