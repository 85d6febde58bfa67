"""CSV export: one line per metric, effects in percent, for spreadsheets and plots."""

from __future__ import annotations

import csv
import io

from orchard.bench.verdict import VerdictDecision

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
            ]
        )
    if not decision.metrics:  # nothing measured (identical programs, or ERROR): the one line says why
        writer.writerow(["", decision.verdict, "; ".join(decision.reasons), *[""] * (len(COLUMNS) - 3)])
    return out.getvalue()


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"
