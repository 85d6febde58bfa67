"""Instruction counts per binary, not per pair, where the A/A campaign shows the count does not vary.

A count is a separate, untimed run under a simulator (cachegrind: 20 to 300
times the timed run, valgrind's own start-up included), and counting every
run of every pair made instructions the dearest metric of a verdict, though
a deterministic program gives the same count every time. So when the A/A
calibration saw every count of the baseline within a relative spread `s`
(max - min over min, over all its runs) no wider than an eighth of the
metric's minimum floor, each binary is counted `COUNTS` times, once per
verdict, and the metric is decided from those. Where every A/A count was
identical (s = 0) the A/A campaign is the evidence that the program's count
does not vary: the candidate is counted once (`IDENTICAL_COUNTS`), and the
baseline not at all when it is the very binary the calibration counted
(same sha256): its count is the calibration's. A count costs 20 to 60 timed
runs of a short program (valgrind's start-up, twice through a wrapper
script), so this is what brings counting near the timed runs' own cost.
The row's note says which. What it gives up: a candidate whose count varies
while the baseline's never did is judged on its one count (a candidate that
strays is seen only where the A/A counts were not identical).

    effect   = median(candidate counts) / median(baseline counts) - 1
    interval = (1 + effect) x [(1 + t)^-2, (1 + t)^2] - 1

where t is the widest of `s` and the spreads of this verdict's own counts:
each median is within a factor (1 + t) of any other count of its binary, so
the true ratio lies in the interval as long as no binary strays further
than the A/A campaign and these counts saw (its soundness assumption, and
why the tolerance is a share of the floor: the interval then spans at most
a quarter of it, and a shift of 1.25 floors is claimed). It is classified
against the floor as the paired route classifies its interval, and carries
no error probability, so Holm's split of alpha is left to the other metrics.

If a binary's counts here stray beyond the tolerance (a candidate whose
loop length comes from /dev/urandom), or a count fails, the scenario falls
back to counting per pair for the rest of the verdict: the pairs already
measured get counts now (a count is a separate run either way), and the
metric is judged on paired differences as before, with a note saying why.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, MutableSequence, Sequence
from pathlib import Path
from typing import Any

from orchard.bench.binary import binary_sha256
from orchard.bench.deciding.calibration import Calibration
from orchard.bench.deciding.decide import classify
from orchard.bench.deciding.spread import Spread
from orchard.bench.deciding.verdict import Method, MetricResult, MetricSpec, Scale
from orchard.bench.measuring import instructions
from orchard.bench.measuring.measure import Observation, Workbench, count_instructions
from orchard.bench.results.store import RunWriter
from orchard.bench.suites.suite import Scenario, Suite

COUNTS = 3  # counts of each binary: enough to see a binary that strays, a fraction of per-pair counting
IDENTICAL_COUNTS = 1  # of a binary the calibration did not count, where every A/A count was identical
TOLERANCE_SHARE = 1 / 8  # of the metric's minimum floor: the widest A/A spread counted per binary
COUNTED_METRICS = (instructions.METRIC, instructions.CYCLES)
ROLES = ("baseline", "candidate")


def spread(values: Sequence[float]) -> float:
    """(max - min) / min: how far apart the counts of one binary are, relatively."""
    return (max(values) - min(values)) / min(values) if values and min(values) > 0 else math.inf


def tolerance(spec: MetricSpec) -> float:
    return spec.min_floor * TOLERANCE_SHARE


class BinaryCounts:
    """The scenarios of one verdict counted per binary, their counts, and their metrics' decisions."""

    def __init__(self, suite: Suite, cal: Calibration, bench: Workbench, binaries: Mapping[str, Path],
                 writer: RunWriter, meta: Mapping[str, Any]) -> None:
        self.suite, self.cal, self.bench = suite, cal, bench
        self.binaries, self.writer, self.meta = binaries, writer, meta
        self.counts: dict[tuple[str, str], list[Observation]] = {}
        self.fallbacks: dict[str, str] = {}  # scenario -> why it is counted per pair after all
        self.scenarios: set[str] = {s.name for s in suite.scenarios if self._deterministic(s)}

    def _specs(self, scenario: str) -> list[MetricSpec]:
        return [s for s in self.suite.metrics if s.scenario == scenario and s.metric in COUNTED_METRICS]

    def _deterministic(self, scenario: Scenario) -> bool:
        """Every counted metric judged for `scenario` stayed within its tolerance in the A/A campaign."""
        specs = self._specs(scenario.name)
        spreads = [self.cal.metrics[s.key].spread if s.key in self.cal.metrics else None for s in specs]
        return bool(specs) and all(v is not None and v <= tolerance(s) for s, v in zip(specs, spreads, strict=True))

    def _identical(self, scenario: str) -> bool:
        """Every A/A count of every counted metric of `scenario` was the same."""
        return all(self.cal.metrics[s.key].spread == 0.0 for s in self._specs(scenario))

    def _per_binary(self, scenario: str) -> int:
        return IDENTICAL_COUNTS if self._identical(scenario) else COUNTS

    def _calibrated_baseline(self, scenario: str) -> bool:
        """The baseline's counts are the calibration's: identical there, and the same binary."""
        return (self._identical(scenario) and self.cal.baseline_sha256 is not None
                and all(self.cal.metrics[s.key].median is not None for s in self._specs(scenario))
                and binary_sha256(self.binaries["baseline"]) == self.cal.baseline_sha256)

    def _take(self, scenario: Scenario, role: str, upto: int) -> list[Observation]:
        """Count `role`'s binary until it has `upto` counts of `scenario`, each recorded as a `counted` row."""
        taken = self.counts.setdefault((scenario.name, role), [])
        while len(taken) < upto:
            row = {**self.meta, "step_kind": "counted", "scenario": scenario.name, "role": role, "count": len(taken),
                   "binary": str(self.binaries[role]), "instructions_counting": "per binary"}
            observation = Observation(scenario.name, role, {}, None, None, True, "", row)
            count_instructions(self.bench, scenario, self.binaries[role], observation)
            self.writer.write(observation.row)
            taken.append(observation)
        return taken

    def _strays(self, scenario: Scenario) -> str | None:
        """Why this verdict's counts of `scenario` cannot be decided per binary, if they cannot."""
        for role in ROLES:
            if role == "baseline" and self._calibrated_baseline(scenario.name):
                continue
            taken = self._take(scenario, role, self._per_binary(scenario.name))
            failed = next((o.failure for o in taken if not o.ok), None)
            if failed:
                return f"a {role} count failed ({failed})"
            for spec in self._specs(scenario.name):
                seen = spread([float(o.values[spec.metric] or 0.0) for o in taken])
                if seen > tolerance(spec):
                    return (f"the {role}'s {len(taken)} counts of {spec.metric} spread {seen:.3%}, beyond the "
                            f"{tolerance(spec):.3%} tolerance")
        return None

    def judge(self, pairs: int, samples: Mapping[str, tuple[MutableSequence[float | None],
                                                            MutableSequence[float | None]]]) -> list[MetricResult]:
        """The per-binary metrics' results after `pairs` pairs; a scenario that strays falls back to per pair, its
        `pairs` first samples filled with counts taken now."""
        results = []
        for scenario in self.suite.scenarios:
            if scenario.name not in self.scenarios:
                continue
            why = self._strays(scenario)
            if why is None:
                results += [self._result(spec) for spec in self._specs(scenario.name)]
                continue
            self.scenarios.discard(scenario.name)
            self.fallbacks[scenario.name] = f"counted per pair: {why}"
            for side, role in enumerate(ROLES):
                taken = self._take(scenario, role, pairs)
                for spec in self._specs(scenario.name):
                    samples[spec.key][side][:pairs] = [o.values.get(spec.metric) for o in taken[:pairs]]
        return results

    def _result(self, spec: MetricSpec) -> MetricResult:
        calibrated = self.cal.metrics[spec.key]
        base, cand = ([float(o.values[spec.metric] or 0.0) for o in self.counts.get((spec.scenario, role), [])]
                      for role in ROLES)
        from_calibration = not base
        base = base or [float(calibrated.median or 0.0)]
        widest = max(calibrated.spread or 0.0, spread(base), spread(cand))
        a, b = statistics.median(base), statistics.median(cand)
        effect, band = math.log(b / a), 2.0 * math.log1p(widest)
        floor = spec.floor(calibrated.noise())
        low, high = sorted((spec.bad_sign * (effect - band), spec.bad_sign * (effect + band)))
        verdict = classify(low, high, math.log1p(floor), math.log1p(spec.matters))
        return MetricResult(
            scenario=spec.scenario, metric=spec.metric, direction=spec.direction, target=spec.target,
            verdict=verdict, method=Method.COUNTED, scale=Scale.LOG_RATIO, effect=math.expm1(effect),
            interval=(math.expm1(effect - band), math.expm1(effect + band)), confidence=None, floor=floor,
            n=len(cand), mde=math.expm1(math.log1p(floor) + band), baseline_median=a, candidate_median=b,
            baseline_spread=Spread.of(base), candidate_spread=Spread.of(cand),
            note=(f"counted {len(cand)}x per binary, not per pair" + (
                  f" (the baseline not at all: its count is the A/A calibration's, {2 * calibrated.n} identical "
                  "counts of this very binary)" if from_calibration else "")
                  + f": A/A spread {calibrated.spread or 0.0:.3%} within the {tolerance(spec):.3%} tolerance; "
                  f"interval widened by the widest spread {widest:.3%}"),
        )

    def note(self, metric: MetricResult) -> MetricResult:
        """A per-pair result of a scenario that fell back, with why it was counted per pair."""
        why = self.fallbacks.get(metric.scenario)
        if why is None or metric.metric not in COUNTED_METRICS:
            return metric
        return dataclasses.replace(metric, note="; ".join(filter(None, (why, metric.note))))
