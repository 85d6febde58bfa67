"""Simulated campaigns on a noisy machine: the verdict's error rates.

The model: 3% log-normal noise per run, a slow sinusoidal drift of the
machine (4% amplitude) shared by both runs of a pair, and an occasional
outlier run (3% of runs, 30% slower). Calibration, looks, alpha spending,
Holm and the decision rule are the library's own, exactly as a campaign
uses them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from orchard.bench.deciding import calibration
from orchard.bench.deciding.decide import AdaptivePlan, decide_metrics, overall, settled
from orchard.bench.deciding.verdict import Direction, Method, MetricSpec, MetricVerdict, VerdictWord

WALL = MetricSpec("sim", "wall_ms", Direction.LOWER, min_floor=0.0)
TOKENS = MetricSpec("sim", "estimated_total_tokens", Direction.LOWER, min_floor=0.0)


class NoisyMachine:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.clock = float(self.rng.integers(0, 10_000))

    def run(self, factor: float) -> float:
        self.clock += 1
        drift = 1 + 0.04 * math.sin(self.clock / 30.0)
        value = 100.0 * factor * drift * math.exp(self.rng.normal(0, 0.03))
        if self.rng.random() < 0.03:
            value *= 1.3
        return value

    def pairs(self, n: int, shift: float) -> tuple[list[float], list[float]]:
        a, b = [], []
        for _ in range(n):
            if self.rng.random() < 0.5:
                a.append(self.run(1.0))
                b.append(self.run(1.0 + shift))
            else:
                b.append(self.run(1.0 + shift))
                a.append(self.run(1.0))
        return a, b


def campaign(machine: NoisyMachine, shift: float, max_runs: int = 20) -> tuple[str, int]:
    """Calibrate (40 A/A pairs), warm up, then measure until settled or max_runs."""
    cal, failed = calibration.compute([WALL], {WALL.key: machine.pairs(40, 0.0)}, 0.05)
    if failed:
        return "CALIBRATION-FAILED", 0
    noise = {WALL.key: cal[WALL.key].noise()}
    plan = AdaptivePlan(8, max_runs, 0.05)
    machine.pairs(1, shift)  # warm-up pair, not judged
    a, b = machine.pairs(max_runs, shift)
    for n in range(1, max_runs + 1):
        level = plan.alpha_at(n)
        if level is None:
            continue
        metrics = decide_metrics([WALL], {WALL.key: (a[:n], b[:n])}, noise, level)
        if settled(metrics):
            break
    return overall(metrics, []).verdict, n


TRIALS = 300


def rates(shift: float, seed: int) -> dict[str, float]:
    """Verdict frequencies over campaigns whose calibration passed.

    A failed calibration stops the user before any verdict (they calibrate
    again), so it is neither a claim nor a miss; its own rate is reported.
    """
    machine = NoisyMachine(seed)
    outcomes = [campaign(machine, shift)[0] for _ in range(TRIALS)]
    judged = [o for o in outcomes if o != "CALIBRATION-FAILED"]
    result = {name: judged.count(name) / len(judged) for name in set(judged)}
    result["calibration_failed"] = (len(outcomes) - len(judged)) / len(outcomes)
    assert result["calibration_failed"] <= 0.10, result
    return result


def test_aa_false_claims_stay_under_five_percent() -> None:
    observed = rates(0.0, seed=11)
    false_claims = observed.get(VerdictWord.PASS, 0.0) + observed.get(VerdictWord.REGRESSED, 0.0)
    assert false_claims <= 0.05, observed


@pytest.mark.parametrize("shift, claim", [(0.05, VerdictWord.REGRESSED), (-0.05, VerdictWord.PASS)])
def test_five_percent_shift_is_detected_within_twenty_pairs(shift: float, claim: str) -> None:
    observed = rates(shift, seed=23)
    assert observed.get(claim, 0.0) >= 0.80, observed
    wrong = VerdictWord.REGRESSED if claim == VerdictWord.PASS else VerdictWord.PASS
    assert observed.get(wrong, 0.0) == 0.0


def test_large_shift_stops_early() -> None:
    machine = NoisyMachine(5)
    sizes = [campaign(machine, 0.30)[1] for _ in range(30)]
    assert max(sizes) < 20


def test_calibration_failure_when_aa_interval_excludes_zero() -> None:
    """A 'same binary' whose second arm is systematically 5% slower is a broken A/A, not a floor."""
    machine = NoisyMachine(3)
    a, b = machine.pairs(40, 0.05)
    _, failed = calibration.compute([WALL], {WALL.key: (a, b)}, 0.05)
    assert failed == [WALL.key]


def test_deterministic_metric_is_compared_exactly() -> None:
    tokens_aa = ([1200.0] * 40, [1200.0] * 40)
    cal, failed = calibration.compute([TOKENS], {TOKENS.key: tokens_aa}, 0.05)
    assert not failed and cal[TOKENS.key].deterministic and cal[TOKENS.key].floor == 0.0
    noise = {TOKENS.key: cal[TOKENS.key].noise()}
    # one pair is enough: there is no noise to average away
    fewer = decide_metrics([TOKENS], {TOKENS.key: ([1200.0] * 6, [1188.0] * 6)}, noise, 0.05)[0]
    assert (fewer.verdict, fewer.method) == (MetricVerdict.IMPROVED, Method.EXACT)
    assert fewer.effect == pytest.approx(-0.01)
    same = decide_metrics([TOKENS], {TOKENS.key: ([1200.0] * 6, [1200.0] * 6)}, noise, 0.05)[0]
    assert same.verdict == "no-change" and same.interval == (0.0, 0.0)
    assert overall([same], []).verdict == VerdictWord.NO_CHANGE
