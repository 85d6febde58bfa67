"""Judging two stored result sets without measuring again: `orchard compare OLD NEW`.

Each file is orchard rows (JSONL) of one subject: a `bench run`, a lane run,
or rows a reader produced; or another tool's result file, detected by its
content (hyperfine, pyperf, pytest-benchmark, Google Benchmark: `readers.py`),
each benchmark a scenario, its samples the tool's own numbers. Rows are grouped by scenario and operation; every
metric measured in all rows of both sides is judged. Where the two sets'
runs line up (the same run or pair numbers on both sides, measured in one
interleaved campaign) the comparison is paired, as a verdict is; otherwise
it is unpaired, with a warning: two campaigns taken one after the other
share no drift even when their run numbers match, so only a shift larger
than the spread between runs can show. No A/A calibration is involved: the
suite's minimum floors (the defaults per metric) are the floors.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from orchard.bench.deciding.decide import decide_metrics, decide_unpaired, overall
from orchard.bench.deciding.verdict import (
    DEFAULT_ALPHA,
    Direction,
    MetricNoise,
    MetricResult,
    MetricSpec,
    VerdictDecision,
)
from orchard.bench.measuring import rows as rowlib
from orchard.bench.results.row_metrics import FIELDS, Quantity, readings
from orchard.bench.suites import readers
from orchard.bench.suites.suite import BUILTIN_METRICS, OPTIONAL_METRICS
from orchard.errors import UsageError
from orchard.jsonlines import read_jsonl

COMPARE_SCHEMA = "orchard.compare/1"
JUDGED_STEPS = ("measured", "total")


@dataclass
class Comparison:
    decision: VerdictDecision
    paired: bool
    warnings: list[str]
    old: Path
    new: Path

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": COMPARE_SCHEMA,
            "verdict": self.decision.verdict,
            "reasons": self.decision.reasons,
            "old": str(self.old),
            "new": str(self.new),
            "paired": self.paired,
            "metrics": [m.to_json() for m in self.decision.metrics],
            "warnings": self.warnings,
        }


@dataclass(frozen=True)
class Loaded:
    """One side of a comparison: its judged rows and the tool that wrote the file (JSONL: orchard)."""

    rows: list[dict[str, Any]]
    fmt: readers.Format


def _load(path: Path) -> Loaded:
    """A file's judged rows: orchard's JSONL rows, or another tool's results (detected by content) as rows."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except OSError as error:
        raise UsageError(f"{path}: cannot read it: {error}") from None
    fmt = readers.sniff(text)
    if fmt is not None:
        return Loaded(tool_rows(path, text, fmt), fmt)
    try:
        loaded = read_jsonl(path)
    except ValueError as error:
        raise UsageError(f"{path}: not orchard rows (JSONL) nor a hyperfine, pyperf, pytest-benchmark or "
                         f"google-benchmark JSON file: {error}") from None
    judged = [
        row
        for row in loaded
        if isinstance(row, dict)
        and row.get("step_kind") in JUDGED_STEPS
        and not row.get("warmup")
        and row.get("returncode") == 0
    ]
    if not judged:
        raise UsageError(f"{path}: no successful measured rows to compare")
    return Loaded(judged, readers.Format.JSONL)


def tool_rows(path: Path, text: str, fmt: readers.Format) -> list[dict[str, Any]]:
    """Another tool's samples as judged rows: one scenario per benchmark, its samples' times as the tool's own
    (harness) metrics, numbered in the file's order."""
    rows = []
    for sample in readers.read(text, fmt, str(path)):
        if sample.get("returncode", 0) != 0:
            continue  # a failed hyperfine run is no sample
        times = {metric: float(sample[metric]) for metric in ("wall_ms", "cpu_ms")
                 if isinstance(sample.get(metric), int | float)}
        rows.append({"scenario": str(sample.get("benchmark")), "subject": str(path), "step_kind": "measured",
                     "run": sample.get("run"), "returncode": 0, "harness_metrics": times})
    if not rows:
        raise UsageError(f"{path}: no successful {fmt} runs to compare")
    return rows


def _one_each(old: Loaded, new: Loaded, old_groups: dict[str, list[Mapping[str, Any]]],
              new_groups: dict[str, list[Mapping[str, Any]]]) -> list[str]:
    """Two tools' files of one benchmark each are that benchmark, whatever each calls it (hyperfine names it by
    its command line: `./old/prog` and `./new/prog`). New's group is renamed old's; the note says so."""
    if old.fmt == readers.Format.JSONL or len(old_groups) != 1 or len(new_groups) != 1 or \
            set(old_groups) == set(new_groups):
        return []
    [(name, rows)], [(theirs, _)] = new_groups.items(), old_groups.items()
    new_groups.clear()
    new_groups[theirs] = rows
    return [f"one benchmark in each file: {theirs} (old) compared with {name} (new)"]


def _span(rows: Sequence[Mapping[str, Any]]) -> tuple[datetime, datetime] | None:
    """When a set of rows was measured, from its first start to its last end; None if a row has no times."""
    try:
        starts = [datetime.fromisoformat(str(r["started_at"])) for r in rows]
        ends = [datetime.fromisoformat(str(r.get("ended_at") or r["started_at"])) for r in rows]
    except (KeyError, ValueError):
        return None
    return min(starts), max(ends)


def measured_apart(old_rows: Sequence[Mapping[str, Any]], new_rows: Sequence[Mapping[str, Any]]) -> str:
    """Why two sets are not paired although their run numbers line up: one was measured after the other ended."""
    old, new = _span(old_rows), _span(new_rows)
    if old is None or new is None or (old[0] <= new[1] and new[0] <= old[1]):
        return ""
    first, second = sorted((old, new))
    gap = (second[0] - first[1]).total_seconds()
    return (f"measured apart ({gap:,.0f} s between the two campaigns, not interleaved): their run numbers line up "
            "but the runs share no moment, so they are not paired")


def _groups(path: Path, rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    subjects: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        scenario, operation = str(row.get("scenario")), str(row.get("operation"))
        key = scenario if operation in (scenario, "None") else f"{scenario}:{operation}"
        groups[key].append(row)
        subjects[key].add(str(row.get("role") or row.get("subject")))
    mixed = {key: names for key, names in subjects.items() if len(names) > 1}
    if mixed:
        key, names = next(iter(mixed.items()))
        raise UsageError(
            f"{path}: {key} holds rows of several subjects ({', '.join(sorted(names))}); "
            "compare files of one subject each"
        )
    return groups


QUANTITY_TEXT = {Quantity.HARNESS: "the harness's own samples",
                 Quantity.PROCESS: "the measured process's own numbers"}


def one_kind(old: Path, new: Path, metric: str, left: set[Quantity], right: set[Quantity]) -> None:
    """Refuse to judge a metric whose rows hold two quantities (a harness's samples beside its process's time)."""
    if len(left | right) > 1:
        said = [" and ".join(QUANTITY_TEXT[q] for q in sorted(side)) for side in (left, right)]
        raise UsageError(
            f"{old} and {new}: {metric} holds {said[0]} in one and {said[1]} in the other, two quantities under "
            "one name (rows from before orchard stored a harness's samples hold its process's time): compare "
            "results measured the same way")


def _run_key(row: Mapping[str, Any]) -> Any:
    return row.get("pair", row.get("run"))


def compare(old: Path, new: Path, alpha: float = DEFAULT_ALPHA) -> Comparison:
    """Judge NEW against OLD, paired where their runs line up."""
    old_loaded, new_loaded = _load(old), _load(new)
    _comparable(old, new, old_loaded, new_loaded)
    old_groups, new_groups = _groups(old, old_loaded.rows), _groups(new, new_loaded.rows)
    renamed = _one_each(old_loaded, new_loaded, old_groups, new_groups)
    shared = [key for key in old_groups if key in new_groups]
    if not shared:
        raise UsageError(f"{old} and {new} share no scenario to compare")
    warnings = renamed + [f"only in one file, not compared: {key}"
                          for key in sorted(set(old_groups) ^ set(new_groups))]
    metrics: list[MetricResult] = []
    all_paired = True
    for key in shared:
        a_rows = old_groups[key]
        b_rows, apart = _lined_up(a_rows, new_groups[key])
        if apart:
            all_paired = False
            warnings.append(f"{key}: {apart}: compared unpaired")
        metrics += _judged(old, new, key, (a_rows, b_rows), not apart, alpha)
    if all_paired and old_loaded.fmt != readers.Format.JSONL:
        warnings.append(f"runs paired by their place in each file: {old_loaded.fmt} records no time per run, so "
                        "whether the two files' runs were interleaved is not known")
    return Comparison(overall(metrics, []), all_paired, warnings, old, new)


def _comparable(old: Path, new: Path, old_loaded: Loaded, new_loaded: Loaded) -> None:
    """Both files of one tool, their rows measured the same way (`rows.COMPARABILITY_KEYS`), else usage error."""
    if old_loaded.fmt != new_loaded.fmt:
        said = {readers.Format.JSONL: "orchard rows"}
        raise UsageError(f"{old} holds {said.get(old_loaded.fmt, f'{old_loaded.fmt} results')} and {new} "
                         f"{said.get(new_loaded.fmt, f'{new_loaded.fmt} results')}: compare two files of one tool")
    for key in rowlib.COMPARABILITY_KEYS:
        left, right = {r.get(key) for r in old_loaded.rows}, {r.get(key) for r in new_loaded.rows}
        if left != right:
            raise UsageError(
                f"{old} and {new} are not comparable: {key} is {sorted(map(str, left))} "
                f"in one and {sorted(map(str, right))} in the other"
            )


def _lined_up(a_rows: list[Mapping[str, Any]],
              b_rows: list[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], str]:
    """NEW's rows in OLD's run order when their runs line up (each run once on both sides) and were measured
    together; else NEW's rows as they are, and why they are compared unpaired."""
    a_keys, b_keys = [_run_key(r) for r in a_rows], [_run_key(r) for r in b_rows]
    paired = None not in a_keys and sorted(a_keys) == sorted(b_keys) and len(set(a_keys)) == len(a_keys)
    apart = measured_apart(a_rows, b_rows) if paired else ""
    if paired and not apart:
        b_by_key = {_run_key(r): r for r in b_rows}
        return [b_by_key[k] for k in a_keys], ""
    return b_rows, apart or f"runs do not line up ({len(a_rows)} old, {len(b_rows)} new)"


def _judged(old: Path, new: Path, key: str, sides: tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]],
            paired: bool, alpha: float) -> list[MetricResult]:
    """One scenario's metrics, each that both sides measured in every run, judged paired or unpaired."""
    specs, samples = [], {}
    a_read, b_read = ([readings(r) for r in rows] for rows in sides)
    for metric in FIELDS:
        a, b = [found.get(metric) for found in a_read], [found.get(metric) for found in b_read]
        if None in a or None in b:
            continue
        one_kind(old, new, f"{key}/{metric}", {r.quantity for r in a if r}, {r.quantity for r in b if r})
        spec = MetricSpec(key, metric, Direction.LOWER, {**BUILTIN_METRICS, **OPTIONAL_METRICS}[metric])
        specs.append(spec)
        samples[spec.key] = ([r.value for r in a if r], [r.value for r in b if r])
    if not paired:
        return decide_unpaired(specs, samples, alpha)
    noise = {
        spec.key: MetricNoise(  # one sample a side shows no determinism (a single Google Benchmark run)
            spec.min_floor, len(samples[spec.key][0]) > 1 and len(set(samples[spec.key][0])) == 1
            and len(set(samples[spec.key][1])) == 1, 0.0
        )
        for spec in specs
    }
    return decide_metrics(specs, samples, noise, alpha)
