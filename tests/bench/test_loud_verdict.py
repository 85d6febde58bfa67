"""A verdict that keeps its power on a loud machine (issue 24 item 3), on generated samples.

The loud machine: paired log-ratios with a 15% SD (what a 2-core VM at load near 1 gave on wall time), no shared
drift (the most favourable case for the unpaired rules it is compared with). The calibration, looks, alpha
spending and decision are the library's own.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from orchard.bench.campaigns.pairs import Measured, Samples, measure_pairs
from orchard.bench.checks.first_runs import RunSeries
from orchard.bench.deciding import calibration, stats
from orchard.bench.deciding.decide import AdaptivePlan, decide_metrics, extension_note, open_metrics, overall
from orchard.bench.deciding.verdict import Direction, MetricResult, MetricSpec, MetricVerdict, VerdictWord
from orchard.bench.measuring.measure import Observation
from orchard.bench.suites.suite_reader import load_suite
from orchard.errors import UsageError

WALL = MetricSpec("loud", "wall_ms", Direction.LOWER, min_floor=0.01)
SD = 0.15


def loud_pairs(rng: np.random.Generator, n: int, shift: float) -> tuple[np.ndarray, np.ndarray]:
    """n (baseline, candidate) pairs whose log-ratios have SD `SD` around log(1 + shift)."""
    a = 20.0 * np.exp(rng.normal(0.0, SD / np.sqrt(2), n))
    b = 20.0 * (1 + shift) * np.exp(rng.normal(0.0, SD / np.sqrt(2), n))
    return a, b


def judge(plan: AdaptivePlan, a: np.ndarray, b: np.ndarray, noise: dict[str, object]) -> tuple[list[MetricResult], int]:
    """The looks exactly as `pairs.measure_pairs` takes them: (the last look's metrics, pairs used)."""
    metrics: list[MetricResult] = []
    for n in range(1, plan.last + 1):
        level = plan.alpha_at(n)
        if level is None:
            continue
        metrics = decide_metrics([WALL], {WALL.key: (a[:n], b[:n])}, noise, level)  # type: ignore[arg-type]
        if plan.stops(n, metrics):
            return metrics, n
    return metrics, plan.last


def test_floor_is_the_aa_offset_not_the_aa_noise() -> None:
    """The issue's case: 30 A/A pairs at 14% SD gave a 4.3% floor (the A/A interval's half-width), which the
    verdict's own interval then had to clear on top of its own noise. The floor is the offset the A/A
    campaign shows (none when its interval contains zero); an offset it does show is kept."""
    rng = np.random.default_rng(7)
    a, b = (20.0 * np.exp(rng.normal(0.0, 0.14 / np.sqrt(2), 30)) for _ in range(2))
    cal, failed = calibration.compute([WALL], {WALL.key: (list(a), list(b))}, 0.05)
    resolution = stats.hl_interval(np.log(b / a), 0.95)
    assert not failed and resolution.low < 0 < resolution.high and (resolution.high - resolution.low) / 2 > 0.035
    assert cal[WALL.key].floor == 0.0 and WALL.floor(cal[WALL.key].noise()) == WALL.min_floor
    # an offset the A/A interval shows (at the verdict's level) is the floor, measured from zero
    shifted, _ = calibration.compute([WALL], {WALL.key: (list(a), list(b * 1.06))}, 0.05)
    low = np.expm1(stats.hl_interval(np.log(b * 1.06 / a), 0.95).low)
    assert low > 0 and shifted[WALL.key].floor == pytest.approx(low)
    assert calibration.offset_floor(float("-inf"), float("inf")) == float("inf")


def test_extra_looks_spend_part_of_alpha_and_no_more() -> None:
    plan = AdaptivePlan(8, 20, 0.05, extra_runs=20)
    assert plan.looks == [8, 12, 20] and plan.extra_looks == [30, 40] and plan.last == 40
    levels = [plan.alpha_at(n) for n in plan.looks + plan.extra_looks]
    assert sum(level or 0.0 for level in levels) == pytest.approx(0.05)
    assert plan.alpha_at(25) is None
    # without extra pairs the looks and their levels are what they were
    plain = AdaptivePlan(8, 20, 0.05)
    assert plain.extra_looks == [] and plain.last == 20
    assert [plain.alpha_at(n) for n in plain.looks] == pytest.approx([0.05 * w / 1.28 for w in (0.064, 0.216, 1.0)])


def test_an_open_metric_goes_on_and_a_hopeless_one_stops() -> None:
    """Past `runs`, only a metric whose estimate lies beyond its floor while its interval straddles it, and
    that could clear the floor by the last extra look were the change a standard error larger, goes on; the
    verdict says how many pairs it took and why."""
    plan = AdaptivePlan(8, 20, 0.05, extra_runs=20)
    noise = {WALL.key: calibration.MetricCalibration(0.01, False, SD, 0.0, (-0.05, 0.05), 40).noise()}

    def at_runs(spread: float, shift: float) -> list[MetricResult]:
        ratios = np.exp(np.linspace(-spread, spread, 20) + shift)
        return decide_metrics([WALL], {WALL.key: (np.ones(20), ratios)}, noise, plan.alpha_at(20) or 0.0)

    beyond = at_runs(0.18, 0.06)  # estimate +6%, interval [-0.6%, +13.5%]
    (why,) = open_metrics(beyond, plan.last)
    assert beyond[0].verdict == MetricVerdict.UNCLEAR and "estimate +6" in why and "beyond its floor 1.00%" in why
    assert not plan.stops(20, beyond)
    (line,) = extension_note(32, 20, [why])
    assert line.startswith("measured 32 pairs, past runs = 20, because loud/wall_ms: estimate +6")
    inside = at_runs(0.18, 0.0)  # the estimate inside the floor: hopeless
    assert open_metrics(inside, plan.last) == [] and plan.stops(20, inside)
    too_wide = at_runs(0.40, 0.03)  # 20 more pairs would not narrow [-11.1%, +19.4%] enough to clear 1%
    assert too_wide[0].verdict == MetricVerdict.UNCLEAR and open_metrics(too_wide, plan.last) == []
    assert open_metrics(too_wide, 80) != []  # 60 more would
    assert extension_note(20, 20, []) == []


def rates(shift: float, trials: int, seed: int) -> tuple[float, float, float]:
    """(orchard's claim rate, mean pairs used, best of Welch / Mann-Whitney on the first `runs` pairs)."""
    from scipy import stats as scipy_stats  # ~2 s to import: here, not in every xdist worker's collection

    rng = np.random.default_rng(seed)
    aa_a, aa_b = loud_pairs(rng, 40, 0.0)
    cal, failed = calibration.compute([WALL], {WALL.key: (list(aa_a), list(aa_b))}, 0.05)
    assert not failed
    noise = {WALL.key: cal[WALL.key].noise()}
    plan = AdaptivePlan(8, 20, 0.05, extra_runs=20)
    claims, used, welch, mann_whitney = 0, [], 0, 0
    for _ in range(trials):
        a, b = loud_pairs(rng, plan.last, shift)
        metrics, n = judge(plan, a, b, noise)
        used.append(n)
        claims += overall(metrics, []).verdict in (VerdictWord.REGRESSED, VerdictWord.PASS)
        first_a, first_b = a[:20], b[:20]
        welch += scipy_stats.ttest_ind(first_b, first_a, equal_var=False).pvalue < 0.05
        mann_whitney += scipy_stats.mannwhitneyu(first_b, first_a).pvalue < 0.05
    return claims / trials, float(np.mean(used)), max(welch, mann_whitney) / trials


def test_aa_false_claims_stay_under_five_percent_with_extra_looks() -> None:
    claimed, _, _ = rates(0.0, trials=120, seed=31)
    assert claimed <= 0.05


def test_ten_percent_shift_is_detected_at_least_as_often_as_the_unpaired_rules() -> None:
    """At 15% pair noise a +10% shift: the old floor (the A/A half-width, about 4%) and the 20-pair cap left it
    unclaimed where the t-test and Mann-Whitney claimed it."""
    detected, used, peers = rates(0.10, trials=60, seed=41)
    assert detected >= peers and detected >= 0.7, (detected, peers)
    assert used < 40


def test_extra_runs_is_a_suite_setting(tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    body = '[[scenario]]\nname = "work"\ncommand = ["{bin}"]\n\n[[metric]]\nname = "wall_ms"\n'
    suite.write_text('[suite]\nruns = 12\n\n' + body)
    assert load_suite(suite).extra_runs == 12  # as many as `runs` unless the suite says
    suite.write_text('[suite]\nruns = 12\nextra_runs = 0\n\n' + body)
    assert load_suite(suite).extra_runs == 0
    suite.write_text('[suite]\nextra_runs = -4\n\n' + body)
    with pytest.raises(UsageError, match=r"'extra_runs' must be 0 \(never past 'runs'\) or more \(got -4\)"):
        load_suite(suite)


class ScriptedRunner:
    """Stands in for `PairRunner`: each pair's values come from a list (no process runs, no lock)."""

    seed = 1

    def __init__(self, baseline: np.ndarray, candidate: np.ndarray) -> None:
        self.values = list(zip(baseline, candidate, strict=True))
        self.pairs_run = 0
        # what the per-binary instruction counts read: no scenario of this suite counts instructions
        self.suite = SimpleNamespace(scenarios=(), metrics=(WALL,))
        self.bench, self.binaries, self.writer, self.base_meta, self.per_binary = None, {}, None, {}, set()
        self.retired: set[str] = set()  # scenarios decided exactly: none here (its one metric is timed)

    def run_pair(self, index: int, warmup: bool) -> list[tuple[Observation, Observation, list[object]]]:
        a, b = self.values[index]
        self.pairs_run += 1
        return [(
            Observation("loud", "baseline", {"wall_ms": float(a)}, None, None, True, "", {}),
            Observation("loud", "candidate", {"wall_ms": float(b)}, None, None, True, "", {}),
            [],
        )]


def scripted(ratios: np.ndarray, extra_runs: int) -> tuple[Measured, int]:
    runner = ScriptedRunner(np.full(len(ratios) + 1, 20.0), 20.0 * np.concatenate([[1.0], ratios]))
    cal = calibration.Calibration("loud", "d", "f", 0.0, 40, 1, "b", {
        WALL.key: calibration.MetricCalibration(0.0, False, SD, 0.0, (-0.05, 0.05), 40)})
    plan = AdaptivePlan(8, 20, 0.05, extra_runs)
    measured = measure_pairs(runner, (Samples([WALL]), RunSeries([WALL])), cal, plan,  # type: ignore[arg-type]
                             lambda *_: None, lambda: None)
    return measured, runner.pairs_run


def test_a_campaign_goes_on_past_runs_while_a_metric_is_open() -> None:
    """At 20 pairs the estimate (+6%) lies beyond the 1% floor and the interval straddles it: the campaign
    measures on to its extra looks and says why; with `extra_runs = 0`, or an estimate inside the floor, it
    stops at 20 as before."""
    rng = np.random.default_rng(3)
    ratios = np.exp(np.concatenate([rng.permutation(np.linspace(-0.18, 0.18, 20)) + 0.06,
                                    rng.normal(0.06, 0.05, 20)]))
    measured, run = scripted(ratios, extra_runs=20)
    assert measured.pairs in (30, 40) and run == measured.pairs + 1  # the warm-up pair besides
    (why,) = measured.went_on
    assert why.startswith("loud/wall_ms: estimate +6") and "straddling it" in why
    assert measured.metrics[0].verdict == MetricVerdict.REGRESSED
    plain, _ = scripted(ratios, extra_runs=0)
    assert plain.pairs == 20 and plain.went_on == [] and plain.metrics[0].verdict == MetricVerdict.UNCLEAR
    inside, _ = scripted(ratios / np.exp(0.06), extra_runs=20)
    assert inside.pairs == 20 and inside.went_on == []
