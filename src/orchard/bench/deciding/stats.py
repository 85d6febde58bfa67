"""Paired statistics for the verdict: Hodges-Lehmann with exact intervals.

A verdict compares pairs (one baseline run and one candidate run taken back
to back), so slow drift of the machine cancels within a pair. Each pair gives
one difference on a relative scale (log-ratio when every value is positive).
The Hodges-Lehmann estimate (median of Walsh averages) is robust to the
occasional outlier that ruins a mean; its confidence interval comes from the
exact null distribution of Wilcoxon's signed-rank statistic, so it is valid
at the small n a benchmark can afford, with no normality assumption.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

# samples: a list of numbers or an array of them
Values = Sequence[float] | npt.NDArray[np.float64]
# Relative efficiency of Hodges-Lehmann against the mean under normal noise
# is 3/pi, so its standard error is sqrt(pi/3) times the mean's.
HL_SE_FACTOR = math.sqrt(math.pi / 3)
# The MAD of normal data times this is its standard deviation.
MAD_TO_SD = 1.4826


@functools.cache
def _signed_rank_pmf(n: int) -> np.ndarray:
    """P(T+ = t) for t = 0..n(n+1)/2 under H0, by dynamic programming."""
    pmf = np.zeros(n * (n + 1) // 2 + 1)
    pmf[0] = 1.0
    top = 0
    for rank in range(1, n + 1):
        shifted = np.zeros_like(pmf)
        shifted[rank : top + rank + 1] = pmf[: top + 1]
        pmf = 0.5 * (pmf + shifted)
        top += rank
    return pmf


def signed_rank_cdf(n: int) -> np.ndarray:
    """P(T+ <= t) for t = 0..n(n+1)/2."""
    return np.cumsum(_signed_rank_pmf(n))


def walsh_averages(values: Values) -> np.ndarray:
    """All (x_i + x_j) / 2 for i <= j, sorted."""
    x = np.asarray(values, dtype=float)
    i, j = np.triu_indices(len(x))
    return np.sort((x[i] + x[j]) / 2.0)


def hodges_lehmann(values: Values) -> float:
    """The one-sample Hodges-Lehmann estimate: median of the Walsh averages."""
    return float(np.median(walsh_averages(values)))


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    confidence: float  # achieved coverage (exact, at least the requested one)

    def excludes(self, value: float) -> bool:
        return value < self.low or value > self.high


def hl_interval(values: Values, confidence: float) -> Interval:
    """Exact distribution-free interval for the centre of symmetric differences.

    With M Walsh averages sorted, [W_k, W_{M+1-k}] covers the centre with
    probability 1 - 2 P(T+ <= k-1). The widest k whose coverage is still at
    least `confidence` is used. Too few values for that coverage give an
    unbounded interval: no claim can be made yet.
    """
    n = len(values)
    if n == 0:
        return Interval(-math.inf, math.inf, 1.0)
    walsh = walsh_averages(values)
    cdf = signed_rank_cdf(n)
    tail = (1.0 - confidence) / 2.0
    # largest c with P(T+ <= c) <= tail; k = c + 1 (1-based)
    admissible = np.nonzero(cdf <= tail + 1e-12)[0]
    if len(admissible) == 0:
        return Interval(-math.inf, math.inf, 1.0)
    c = int(admissible[-1])
    m = len(walsh)
    return Interval(float(walsh[c]), float(walsh[m - 1 - c]), 1.0 - 2.0 * float(cdf[c]))


def signed_rank_p_greater(values: Values, shift: float = 0.0) -> float:
    """Exact one-sided p-value of H0: centre <= shift against centre > shift.

    Zero differences are dropped (Wilcoxon's convention); ties among the
    absolute differences get average ranks, which makes the p-value slightly
    approximate for tied data.
    """
    d = np.asarray(values, dtype=float) - shift
    d = d[d != 0.0]
    n = len(d)
    if n == 0:
        return 1.0
    ranks = _average_ranks(np.abs(d))
    t_plus = float(ranks[d > 0].sum())
    pmf = _signed_rank_pmf(n)
    # P(T+ >= t_plus); with average ranks t_plus may be fractional
    threshold = math.ceil(t_plus - 1e-9)
    return float(min(1.0, pmf[threshold:].sum()))


def _average_ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values))
    sorted_values = values[order]
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and sorted_values[j + 1] == sorted_values[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def robust_sd(values: Values) -> float:
    """Standard deviation estimated from the MAD (outliers do not inflate it)."""
    x = np.asarray(values, dtype=float)
    if len(x) < 2:
        return math.nan
    return float(MAD_TO_SD * np.median(np.abs(x - np.median(x))))


def z(probability: float) -> float:
    return NormalDist().inv_cdf(probability)


def minimum_detectable_effect(sd: float, n: int, alpha: float, floor: float, power: float = 0.8) -> float:
    """Smallest true effect that would clear `floor` with `power` at this n.

    Normal approximation to the HL interval: floor + (z_{1-alpha} + z_power) * SE.
    """
    if n < 1 or not math.isfinite(sd):
        return math.inf
    return floor + (z(1.0 - alpha) + z(power)) * HL_SE_FACTOR * sd / math.sqrt(n)


def holm_levels(p_values: Sequence[float], alpha: float) -> list[float]:
    """Per-hypothesis levels of Holm's step-down procedure, in input order.

    The k-th smallest p-value is tested at alpha / (m - k + 1); once one is
    not rejected, every later one is held to that same level (it cannot be
    rejected at a looser level than a hypothesis with a smaller p-value).
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda index: p_values[index])
    levels = [0.0] * m
    stopped_at: float | None = None
    for step, index in enumerate(order):
        level = alpha / (m - step) if stopped_at is None else stopped_at
        if stopped_at is None and p_values[index] > level:
            stopped_at = level
        levels[index] = level
    return levels


def shift_interval(a: Sequence[float], b: Sequence[float], confidence: float) -> tuple[float, Interval]:
    """Two-sample Hodges-Lehmann shift of b against a, with the Mann-Whitney interval.

    For samples that are not paired (two stored runs whose runs do not line
    up): the estimate is the median of all differences b_j - a_i, the
    interval their order statistics at the normal approximation of the
    Mann-Whitney U distribution. Too few values give an unbounded interval.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(x) == 0 or len(y) == 0:
        return math.nan, Interval(-math.inf, math.inf, 1.0)
    differences = np.sort(np.subtract.outer(y, x).ravel())
    m, n = len(x), len(y)
    half = z(1.0 - (1.0 - confidence) / 2.0) * math.sqrt(m * n * (m + n + 1) / 12.0)
    k = math.floor(m * n / 2.0 - half)
    estimate = float(np.median(differences))
    if k < 0:
        return estimate, Interval(-math.inf, math.inf, 1.0)
    return estimate, Interval(float(differences[k]), float(differences[m * n - 1 - k]), confidence)
