"""What a `rows` or `python` scenario's harness reported: its rows read in the scenario's format (none from a
harness that succeeded is an error naming the file), selected by `where`, a metric's values aggregated, and the
digest of the determinism fields."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchard.bench.suites import readers
from orchard.bench.suites.suite import Scenario
from orchard.errors import UsageError


def as_number(value: Any) -> float | None:
    """A row field as a number (true/false count as 1/0); anything else is unmeasured."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    return None


def aggregate(values: list[float], how: str) -> float | None:
    if not values:
        return None
    if how == "sum":
        return sum(values)
    if how == "max":
        return max(values)
    if how == "mean":
        return sum(values) / len(values)
    return values[-1]


def metric(harness_rows: list[dict[str, Any]], name: str, how: str) -> float | None:
    """A metric over the selected rows: the numbers among its values, aggregated as the scenario says."""
    return aggregate([v for v in (as_number(r.get(name)) for r in harness_rows) if v is not None], how)


def select(harness_rows: list[dict[str, Any]], where: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [row for row in harness_rows if all(row.get(k) == v for k, v in where.items())]


def read_rows(scenario: Scenario, stdout: str, results_file: Path | None, ok: bool) -> list[dict[str, Any]]:
    """The harness's rows, read from its results file or stdout in the scenario's format.

    No rows from a harness that succeeded is an error naming the file: judging
    zero rows would judge nothing (exit 2 for a baseline or a subject; for a
    candidate, its failed run). A failed harness is the run's failure.
    """
    fmt = readers.Format(scenario.format)
    if results_file is None:
        text, source = stdout, f"scenario '{scenario.name}': the harness's stdout"
    else:
        source = f"scenario '{scenario.name}': results file {results_file}"
        try:
            text = results_file.read_text(errors="replace")
        except OSError as error:
            if not ok:
                return []
            raise UsageError(f"{source}: not written by the harness ({error.strerror})") from None
    if not ok:
        try:
            return readers.read(text, fmt, source)
        except UsageError:
            return []
    return readers.read(text, fmt, source)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def fields_digest(harness_rows: list[dict[str, Any]], fields: tuple[str, ...]) -> str | None:
    if not fields:
        return None
    picked = [{f: r.get(f) for f in fields} for r in harness_rows]
    return digest(json.dumps(picked, sort_keys=True, default=str).encode())
