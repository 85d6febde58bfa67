"""Change points in a series, found by Apache Otava's E-divisive detection (never a detector of our own).

Otava (the change-point detector MongoDB's and DataStax's CI use: Fleming
et al., "Hunter", ICPE 2023) splits a series where the distributions on the
two sides differ (E-divisive over sliding windows, a t-test to merge weak
points). Only its `otava.analysis` module is used, which needs numpy and
scipy: the `apache-otava` distribution also pins numpy exactly and pulls
BigQuery, Postgres and Slack clients for its own command line, so it is
installed with `--no-deps` (the `history` extra brings scipy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from orchard.errors import UsageError
from orchard.history.series import Series, values

INSTALL = "pip install 'orchard-lab[history]' && pip install --no-deps apache-otava==0.8.0"
MAX_PVALUE = 0.001  # Otava's own default
WINDOW = 50  # Otava's own default: points per sliding window of the split step
MIN_POINTS = 6  # fewer points than this hold no change point worth naming
MIN_MAGNITUDE = 0.02  # smaller changes are left out: A/A and drifting histories gave 0.4-1.1% ones at p <= 0.001


@dataclass(frozen=True)
class ChangePoint:
    """Where a series changed: the first run of the new level, its commit, the size and the significance."""

    metric: str
    subject: str
    where: str
    index: int  # the first point after the change
    commit: str
    before: float  # mean of the level before
    after: float  # mean of the level after
    change: float  # relative: after / before - 1
    pvalue: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Detected:
    """One series with the change points found in it."""

    series: Series
    change_points: tuple[ChangePoint, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.series.metric, "subject": self.series.subject, "where": self.series.where,
                "points": [asdict(p) for p in self.series.points],
                "change_points": [c.to_dict() for c in self.change_points]}


def _otava() -> Any:
    try:
        from otava import analysis  # noqa: PLC0415 (optional: only `orchard history` needs it)
    except ImportError:
        raise UsageError(f"orchard history needs Apache Otava's change-point detector: {INSTALL}") from None
    return analysis


def detect(series: Series, *, max_pvalue: float = MAX_PVALUE, min_magnitude: float = MIN_MAGNITUDE) -> Detected:
    """The change points Otava finds in `series` at `max_pvalue`, each at least `min_magnitude` in size."""
    analysis = _otava()
    numbers = values(series)
    if len(numbers) < MIN_POINTS:
        return Detected(series, ())
    found, _weak = analysis.compute_change_points(numbers, window_len=WINDOW, max_pvalue=max_pvalue,
                                                  min_magnitude=min_magnitude)
    points = []
    for cp in found:
        before, after = float(cp.stats.mean_1), float(cp.stats.mean_2)
        change = after / before - 1 if before else math.inf
        points.append(ChangePoint(series.metric, series.subject, series.where, int(cp.index),
                                  series.points[cp.index].commit, before, after, change, float(cp.stats.pvalue)))
    return Detected(series, tuple(points))


def detect_all(series: Sequence[Series], *, max_pvalue: float = MAX_PVALUE,
               min_magnitude: float = MIN_MAGNITUDE) -> list[Detected]:
    if not series:
        return []
    _otava()  # refuse before reading anything else
    return [detect(s, max_pvalue=max_pvalue, min_magnitude=min_magnitude) for s in series]
