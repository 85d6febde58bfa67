"""CSV export: one line per metric, effects in percent, for spreadsheets and plots."""

from __future__ import annotations

import csv
import io

from orchard.bench.deciding.spread import Spread
from orchard.bench.deciding.verdict import VerdictDecision
from orchard.bench.results.display import ratio
from orchard.units import unit

COLUMNS = (
    "metric",
    "verdict",
    "method",
    "effect_percent",
    "interval_low_percent",
    "interval_high_percent",
    "floor_percent",
    "n",
    "mde_percent",
    "baseline_median",
    "candidate_median",
    "direction",
    "target",
    "unit",  # of the medians, means, deviations and ranges: ms, B or count
    "ratio",  # candidate over baseline: 0.535 is `1.87x faster`
    *(f"{side}_{stat}" for side in ("baseline", "candidate") for stat in ("mean", "sd", "min", "max")),
)


def render(decision: VerdictDecision) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for metric in decision.metrics:
        data = metric.to_json()
        low, high = data["interval_percent"] or (None, None)
        writer.writerow(
            [
                metric.key,
                metric.verdict,
                metric.method,
                _cell(data["effect_percent"]),
                _cell(low),
                _cell(high),
                _cell(data["floor_percent"]),
                metric.n,
                _cell(data["mde_percent"]),
                _cell(metric.baseline_median),
                _cell(metric.candidate_median),
                metric.direction,
                metric.target,
                unit(metric.metric),
                _cell(ratio(metric)),
                *_spread(metric.baseline_spread),
                *_spread(metric.candidate_spread),
            ]
        )
    if not decision.metrics:  # nothing measured (identical programs, or ERROR): the one line says why
        writer.writerow(["", decision.verdict, "; ".join(decision.reasons), *[""] * (len(COLUMNS) - 3)])
    return out.getvalue()


def _spread(spread: Spread | None) -> list[str]:
    if spread is None:
        return [""] * 4
    return [_cell(spread.mean), _cell(spread.sd), _cell(spread.min), _cell(spread.max)]


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"
