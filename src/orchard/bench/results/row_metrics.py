"""What a stored row says each metric was: its value and which quantity that value is.

A `command` scenario's metrics are the measured process's own numbers: its
elapsed time (`elapsed_ms`, the metric `wall_ms`), CPU time, output. A `rows`
or `python` scenario's are the harness's own samples (hyperfine's runs, a
pyperf value, a callable's rows), aggregated as the scenario says: what the
verdict judges. Such a row carries them as the verdict judged them, in
`harness_metrics` (the field says the quantity); its `elapsed_ms` stays the
harness process's time, which is not the harness's `wall_ms`. `verdict`,
`bench run`, `compare` and `history` all read a row's metrics here, so a
metric name means one quantity wherever it is read; rows written before
`harness_metrics` existed hold process numbers only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from orchard.bench.suites.suite import BUILTIN_METRICS, OPTIONAL_METRICS

# metric name -> the field of a process's row it is read from
FIELDS = {
    "wall_ms": "elapsed_ms",
    **{name: name for name in (*BUILTIN_METRICS, *OPTIONAL_METRICS) if name != "wall_ms"},
}


class Quantity(StrEnum):
    """Which quantity a metric's value in a row is."""

    PROCESS = "process"  # the measured process's own numbers (a command scenario, or a harness's process)
    HARNESS = "harness"  # the harness's own samples, aggregated as its scenario says


@dataclass(frozen=True)
class Reading:
    """One metric's value in one row, and which quantity it is."""

    value: float
    quantity: Quantity


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def readings(row: Mapping[str, Any]) -> dict[str, Reading]:
    """Every metric a row holds a number for: the harness's, then the process's for the metrics it did not report."""
    stored = row.get("harness_metrics")
    harness = stored if isinstance(stored, Mapping) else {}
    found = {str(name): Reading(number, Quantity.HARNESS) for name, value in harness.items()
             if (number := _number(value)) is not None}
    for metric, field in FIELDS.items():
        number = _number(row.get(field))
        if metric not in harness and number is not None:
            found[metric] = Reading(number, Quantity.PROCESS)
    return found
