"""A project's stored results as series: per metric, one value per measured run, in the order they ran.

Two sources. Rows: every `results/**/*.jsonl` that `orchard bench run` or
`orchard verdict` wrote (a file is one run; a verdict's candidate rows count,
its baseline's do not: that binary is an older commit, measured at its own
run). A row names its commit when orchard was told it (`ORCHARD_COMMIT`, or
`GITHUB_SHA` in GitHub Actions); otherwise its binary's content hash stands
in. Labs: each lab's main as its journal measured it after every merge.
A series never mixes machines: rows of another machine fingerprint (or
another subject, suite or comparability key) are another series.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchard.bench.measuring.rows import COMPARABILITY_KEYS
from orchard.bench.results.compare import JUDGED_STEPS, one_kind
from orchard.bench.results.row_metrics import FIELDS, Quantity, Reading, readings
from orchard.errors import UsageError
from orchard.jsonlines import read_jsonl
from orchard.lab.db.state import LabState


@dataclass(frozen=True)
class Point:
    """One run's value of a metric: the median of its rows."""

    commit: str  # the commit measured, or `binary <sha256 prefix>` when the rows do not name one
    source: str  # the rows file, or the lab, it was read from
    value: float


@dataclass(frozen=True)
class Series:
    """One metric of one subject on one machine, run after run."""

    metric: str  # scenario/metric
    subject: str
    where: str  # the machine fingerprint (and any other comparability key that is set), or the lab
    points: tuple[Point, ...]


def _commit(row: Mapping[str, Any]) -> str:
    if row.get("commit"):
        return str(row["commit"])
    return f"binary {str(row.get('binary_sha256') or '?')[:12]}"


def _counted(row: Mapping[str, Any]) -> bool:
    """A measured, successful, non-warm-up row of the binary the run is about (never a verdict's baseline)."""
    return (row.get("step_kind") in JUDGED_STEPS and row.get("returncode") == 0 and not row.get("warmup")
            and row.get("role") != "baseline")


def _where(row: Mapping[str, Any]) -> str:
    keys = [f"{key}={row[key]}" for key in COMPARABILITY_KEYS if key != "fixture_id" and row.get(key)]
    return " ".join(keys) or "unknown machine"


def _file_points(path: Path) -> dict[tuple[str, str, str], tuple[Point, frozenset[Quantity]]]:
    """One run file's median per (metric, subject, machine), and which quantities its values were."""
    values: dict[tuple[str, str, str], list[Reading]] = defaultdict(list)
    commits: dict[tuple[str, str, str], str] = {}
    for row in read_jsonl(path):
        if not _counted(row):
            continue
        for metric, reading in readings(row).items():
            if metric in FIELDS:
                key = (f"{row.get('scenario')}/{metric}", str(row.get("subject")), _where(row))
                values[key].append(reading)
                commits[key] = _commit(row)
    return {key: (Point(commits[key], path.name, statistics.median(r.value for r in found)),
                  frozenset(r.quantity for r in found)) for key, found in values.items()}


def from_rows(results: Path) -> list[Series]:
    """Every series in a results directory, each run file a point, in the order the files were written; a series
    whose files hold two quantities (a harness's samples, its process's time) is refused."""
    if not results.is_dir():
        raise UsageError(f"{results}: no such results directory (where `orchard bench run` and `orchard verdict` "
                         "write rows)")
    files = sorted(results.rglob("*.jsonl"), key=lambda p: p.name)  # stamps sort as they were written
    found: dict[tuple[str, str, str], list[Point]] = defaultdict(list)
    kinds: dict[tuple[str, str, str], tuple[Path, frozenset[Quantity]]] = {}
    for path in files:
        for key, (point, quantities) in _file_points(path).items():
            first, seen = kinds.setdefault(key, (path, quantities))
            one_kind(first, path, key[0], set(seen), set(quantities))
            found[key].append(point)
    return [Series(metric, subject, where, tuple(points)) for (metric, subject, where), points in sorted(found.items())]


def from_labs(workspaces: Iterable[Path]) -> list[Series]:
    """The labs' main, per metric, in the order it was measured across all of them: each lab's start, then main
    after every merge (one machine's labs of one project: give no others)."""
    found: dict[str, list[tuple[float, Point]]] = defaultdict(list)
    for root in workspaces:
        if not (root / "lab.db").is_file():
            raise UsageError(f"{root}: not a lab workspace (no lab.db)")
        state = LabState.open_readonly(root)
        try:
            mains = state.measurements("main")
        finally:
            state.close()
        for measured in mains:
            for metric, value in measured.metrics.items():
                if value is not None:
                    found[metric].append((measured.at, Point(measured.commit_id, root.name, float(value))))
    return [Series(metric, "main", "labs", tuple(p for _, p in sorted(points, key=lambda t: t[0])))
            for metric, points in sorted(found.items())]


def values(series: Series) -> Sequence[float]:
    return [p.value for p in series.points]
