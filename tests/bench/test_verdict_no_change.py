"""NO-CHANGE means "no change that matters": a wide noise floor never turns a real change into no-change."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from orchard.bench.deciding.decide import decide_metrics, overall
from orchard.bench.deciding.verdict import Direction, MetricNoise, MetricSpec, MetricVerdict, VerdictWord
from orchard.bench.suites.suite_reader import load_suite
from orchard.errors import UsageError

WIDE = MetricNoise(floor=0.348, deterministic=False, sd=0.15)  # the pytest-benchmark case of the issue


def _pairs(effect: float, n: int = 20) -> tuple[list[float], list[float]]:
    """Pairs with 0.5% noise around a true relative effect."""
    rng = np.random.default_rng(7)
    baseline = 100.0 * np.exp(rng.normal(0, 0.005, n))
    candidate = baseline * (1 + effect) * np.exp(rng.normal(0, 0.005, n))
    return baseline.tolist(), candidate.tolist()


def _judge(spec: MetricSpec, effect: float) -> tuple[MetricVerdict, VerdictWord, list[str]]:
    result = decide_metrics([spec], {spec.key: _pairs(effect)}, {spec.key: WIDE}, 0.05)[0]
    decision = overall([result], [])
    return result.verdict, decision.verdict, decision.reasons


def test_a_real_thirty_percent_change_under_a_wide_floor_is_inconclusive_with_its_mde() -> None:
    spec = MetricSpec("bench", "wall_ms", Direction.LOWER, min_floor=0.01)
    verdict, word, reasons = _judge(spec, 0.30)
    assert (verdict, word) == (MetricVerdict.UNCLEAR, VerdictWord.INCONCLUSIVE), reasons
    assert "MDE" in reasons[0], reasons
    assert "within the noise floor 34.80% but not within 1.00%, the smallest change that matters" in reasons[0]


def test_no_change_is_still_claimed_when_the_interval_lies_within_what_matters() -> None:
    spec = MetricSpec("bench", "wall_ms", Direction.LOWER, min_floor=0.01)
    verdict, word, reasons = _judge(spec, 0.0)
    assert (verdict, word) == (MetricVerdict.UNCHANGED, VerdictWord.NO_CHANGE), reasons


def test_a_suite_that_says_what_matters_gets_no_change_within_it(tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text('[suite]\nno_change_within = 0.40\n\n[[scenario]]\nname = "s"\ncommand = ["{bin}"]\n')
    spec = load_suite(suite).metrics[0]
    assert spec.matters == pytest.approx(0.40)
    assert _judge(spec, 0.30)[:2] == (MetricVerdict.UNCHANGED, VerdictWord.NO_CHANGE)
    suite.write_text(suite.read_text().replace("0.40", "1.5"))
    with pytest.raises(UsageError, match="'no_change_within' is a share of the baseline"):
        load_suite(suite)
