"""The statistics against brute force and against their defining properties."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchard.bench.deciding import stats

finite = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_infinity=False)
samples = st.lists(finite, min_size=1, max_size=12)


def brute_signed_rank_counts(n: int) -> dict[int, int]:
    """Distribution of T+ by enumerating every sign vector."""
    counts: dict[int, int] = {}
    for signs in itertools.product((0, 1), repeat=n):
        t = sum(rank for rank, sign in zip(range(1, n + 1), signs, strict=True) if sign)
        counts[t] = counts.get(t, 0) + 1
    return counts


@pytest.mark.parametrize("n", [1, 2, 5, 8, 11])
def test_signed_rank_distribution_matches_enumeration(n: int) -> None:
    counts = brute_signed_rank_counts(n)
    pmf = stats._signed_rank_pmf(n)
    for t, count in counts.items():
        assert pmf[t] == pytest.approx(count / 2**n)
    assert pmf.sum() == pytest.approx(1.0)


def test_hodges_lehmann_is_median_of_all_walsh_averages() -> None:
    x = [3.0, -1.0, 4.0, 1.5, 9.0, 2.6]
    walsh = [(x[i] + x[j]) / 2 for i in range(len(x)) for j in range(i, len(x))]
    assert stats.hodges_lehmann(x) == pytest.approx(float(np.median(walsh)))


def brute_interval(x: list[float], confidence: float) -> tuple[float, float]:
    """The interval by test inversion: every shift theta the exact two-sided test keeps."""
    n = len(x)
    counts = brute_signed_rank_counts(n)
    total = 2**n
    cdf = {t: sum(c for s, c in counts.items() if s <= t) / total for t in range(n * (n + 1) // 2 + 1)}
    walsh = sorted((x[i] + x[j]) / 2 for i in range(n) for j in range(i, n))
    tail = (1 - confidence) / 2
    c = max((t for t, p in cdf.items() if p <= tail + 1e-12), default=None)
    assert c is not None
    return walsh[c], walsh[len(walsh) - 1 - c]


@pytest.mark.parametrize("seed", range(6))
def test_interval_matches_brute_force_inversion(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = list(rng.normal(0.02, 0.05, size=9))
    low, high = brute_interval(x, 0.90)
    interval = stats.hl_interval(x, 0.90)
    assert (interval.low, interval.high) == pytest.approx((low, high))
    assert interval.confidence >= 0.90


@pytest.mark.parametrize("seed", range(4))
def test_interval_bounds_are_where_the_exact_test_flips(seed: int) -> None:
    """Just inside the interval the one-sided test does not reject; just outside it does."""
    rng = np.random.default_rng(100 + seed)
    x = list(rng.normal(0.0, 1.0, size=10))
    interval = stats.hl_interval(x, 0.90)
    alpha = 0.05
    eps = 1e-9
    assert stats.signed_rank_p_greater(x, interval.low + eps) > alpha
    assert stats.signed_rank_p_greater(x, interval.low - eps) <= alpha
    flipped = [-v for v in x]
    assert stats.signed_rank_p_greater(flipped, -interval.high + eps) > alpha
    assert stats.signed_rank_p_greater(flipped, -interval.high - eps) <= alpha


@pytest.mark.parametrize("seed", range(5))
def test_p_value_matches_scipy_exact_wilcoxon(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(0.3, 1.0, size=12)
    import scipy.stats  # ~2 s to import: here, not in every xdist worker's collection

    expected = scipy.stats.wilcoxon(x, alternative="greater", method="exact").pvalue
    assert stats.signed_rank_p_greater(x) == pytest.approx(expected)


def test_too_few_values_give_no_interval() -> None:
    interval = stats.hl_interval([0.1, 0.2, 0.3, 0.4, 0.5], 0.95)
    assert math.isinf(interval.low) and math.isinf(interval.high)


def test_interval_covers_true_centre_at_its_nominal_rate() -> None:
    rng = np.random.default_rng(7)
    hits = 0
    trials = 2000
    for _ in range(trials):
        x = rng.standard_t(3, size=12) + 1.0
        hits += not stats.hl_interval(x, 0.90).excludes(1.0)
    assert hits / trials >= 0.88


@settings(max_examples=200, deadline=None)
@given(samples, finite, st.floats(min_value=0.01, max_value=100))
def test_hodges_lehmann_is_shift_and_scale_equivariant(x: list[float], shift: float, scale: float) -> None:
    moved = [v * scale + shift for v in x]
    assert stats.hodges_lehmann(moved) == pytest.approx(stats.hodges_lehmann(x) * scale + shift, abs=1e-6)


@settings(max_examples=200, deadline=None)
@given(st.lists(finite, min_size=6, max_size=14), st.sampled_from([0.8, 0.9, 0.95]))
def test_interval_contains_estimate_and_widens_with_confidence(x: list[float], confidence: float) -> None:
    narrow = stats.hl_interval(x, confidence)
    wide = stats.hl_interval(x, min(0.99, confidence + 0.04))
    estimate = stats.hodges_lehmann(x)
    if math.isfinite(narrow.low):
        assert narrow.low <= estimate <= narrow.high
        assert wide.low <= narrow.low and wide.high >= narrow.high


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=8), st.floats(min_value=0.001, max_value=0.2)
)
def test_holm_levels_never_exceed_alpha_and_follow_p_order(p_values: list[float], alpha: float) -> None:
    levels = stats.holm_levels(p_values, alpha)
    assert all(0 < level <= alpha for level in levels)
    assert min(levels) == pytest.approx(alpha / len(p_values))
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    for earlier, later in itertools.pairwise(order):
        assert levels[earlier] <= levels[later] + 1e-15


def test_holm_stops_at_first_acceptance() -> None:
    # 0.01 <= 0.05/3 rejected; 0.04 > 0.05/2 stops: the last is held at 0.025 although 0.045 <= 0.05
    assert stats.holm_levels([0.01, 0.04, 0.045], 0.05) == pytest.approx([0.05 / 3, 0.025, 0.025])


def test_robust_sd_ignores_an_outlier() -> None:
    rng = np.random.default_rng(3)
    x = list(rng.normal(0, 1.0, size=200))
    assert stats.robust_sd(x + [1e6]) == pytest.approx(1.0, rel=0.2)
