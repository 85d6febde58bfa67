"""Readers of other tools' result files: their samples become rows.

A `rows` scenario names the format its harness writes (`format = ...`) and,
when the harness writes a file rather than printing, the file (`file =
"{workdir}/out.json"`). Each reader maps every sample it finds to one row,
so the suite's metrics, `where` and `aggregate` work the same whatever tool
measured. A reader that finds no rows is an error naming the file: zero
rows would silently judge nothing.

| format | what it reads | rows |
|---|---|---|
| `jsonl` | one JSON object per line (orchard's own rows) | as written |
| `hyperfine` | `--export-json` | one per run: `benchmark`, `wall_ms`, `returncode` |
| `pyperf` | `-o FILE` (a suite or one benchmark) | one per value: `benchmark`, `wall_ms`, `value` |
| `pytest-benchmark` | `--benchmark-json` | one per sample (`--benchmark-save-data`), else one per benchmark |
| `google-benchmark` | `--benchmark_out` (JSON) | one per iteration run: `wall_ms`, `cpu_ms`, `iterations` |

`sniff` names the tool that wrote a file from its content: `orchard compare`
reads another tool's file through its reader.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from enum import StrEnum
from typing import Any

from orchard.errors import UsageError
from orchard.jsonlines import json_objects

Row = dict[str, Any]


class Format(StrEnum):
    JSONL = "jsonl"
    HYPERFINE = "hyperfine"
    PYPERF = "pyperf"
    PYTEST_BENCHMARK = "pytest-benchmark"
    GOOGLE_BENCHMARK = "google-benchmark"


def _document(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ValueError(f"not JSON ({error})") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def _list(data: dict[str, Any], key: str) -> list[Any]:
    value = data.get(key)
    return value if isinstance(value, list) else []


def _hyperfine(text: str) -> list[Row]:
    rows = []
    for result in _list(_document(text), "results"):
        codes = result.get("exit_codes") or []
        for index, seconds in enumerate(result.get("times") or []):
            rows.append(
                {
                    "benchmark": result.get("command"),
                    "run": index,
                    "wall_ms": float(seconds) * 1000.0,
                    "returncode": codes[index] if index < len(codes) and codes[index] is not None else 0,
                }
            )
    return rows


_PYPERF_SCALE = {"second": 1000.0}  # to milliseconds; other units are kept as `value` only


def _pyperf(text: str) -> list[Row]:
    data = _document(text)
    common = data.get("metadata") or {}
    # a single benchmark file has the benchmark's fields at the top; a suite lists them
    benchmarks = _list(data, "benchmarks") or ([data] if "runs" in data else [])
    rows = []
    for bench in benchmarks:
        meta = {**common, **(bench.get("metadata") or {})}
        scale = _PYPERF_SCALE.get(meta.get("unit", "second"))
        run_index = 0
        for run in bench.get("runs") or []:
            for value in run.get("values") or []:  # calibration runs have warmups and no values
                row: Row = {
                    "benchmark": meta.get("name"),
                    "run": run_index,
                    "value": float(value),
                    "unit": meta.get("unit", "second"),
                }
                if scale is not None:
                    row["wall_ms"] = float(value) * scale
                rows.append(row)
                run_index += 1
    return rows


def _pytest_benchmark(text: str) -> list[Row]:
    rows = []
    for bench in _list(_document(text), "benchmarks"):
        stats = bench.get("stats") or {}
        name = {"benchmark": bench.get("fullname") or bench.get("name"), "group": bench.get("group")}
        samples = stats.get("data")
        if samples:
            rows += [{**name, "run": i, "wall_ms": float(s) * 1000.0} for i, s in enumerate(samples)]
        elif stats.get("mean") is not None:
            # without --benchmark-save-data only summaries exist: one row, the mean
            rows.append(
                {
                    **name,
                    "run": 0,
                    "wall_ms": float(stats["mean"]) * 1000.0,
                    "median_ms": float(stats.get("median", stats["mean"])) * 1000.0,
                    "rounds": stats.get("rounds"),
                }
            )
    return rows


_GB_UNIT_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1000.0}


def _google_benchmark(text: str) -> list[Row]:
    rows = []
    benchmarks = _list(_document(text), "benchmarks")
    if benchmarks and all(isinstance(b, dict) and b.get("run_type") == "aggregate" for b in benchmarks):
        raise ValueError("only aggregate rows (mean, median, stddev), no repetition to pair: "
                         "run without --benchmark_report_aggregates_only")
    for index, bench in enumerate(benchmarks):
        if bench.get("run_type", "iteration") != "iteration" or bench.get("error_occurred"):
            continue  # aggregates (mean, median, stddev) repeat what the iterations say
        scale = _GB_UNIT_MS.get(bench.get("time_unit", "ns"), 1e-6)
        rows.append(
            {
                "benchmark": bench.get("run_name") or bench.get("name"),
                "run": bench.get("repetition_index", index),
                "wall_ms": float(bench["real_time"]) * scale,
                "cpu_ms": float(bench["cpu_time"]) * scale,
                "iterations": bench.get("iterations"),
            }
        )
    return rows


READERS: dict[Format, Callable[[str], list[Row]]] = {
    Format.JSONL: json_objects,
    Format.HYPERFINE: _hyperfine,
    Format.PYPERF: _pyperf,
    Format.PYTEST_BENCHMARK: _pytest_benchmark,
    Format.GOOGLE_BENCHMARK: _google_benchmark,
}


def sniff(text: str) -> Format | None:
    """Which other tool wrote this JSON document, from the keys each one writes at its top; None if none."""
    try:
        data = _document(text)
    except ValueError:
        return None
    if any(isinstance(r, dict) and "times" in r for r in _list(data, "results")):
        return Format.HYPERFINE
    if "machine_info" in data and "benchmarks" in data:
        return Format.PYTEST_BENCHMARK
    if "context" in data and "benchmarks" in data:
        return Format.GOOGLE_BENCHMARK
    if "version" in data and ("benchmarks" in data or "runs" in data):
        return Format.PYPERF
    return None


def read(text: str, fmt: Format, source: str) -> list[Row]:
    """Rows from one result text; `source` names the file (or stream) in the error when there are none."""
    try:
        rows = READERS[fmt](text)
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise UsageError(f"{source}: cannot read it as {fmt} results: {error}") from None
    if not rows:
        raise UsageError(f"{source}: no {fmt} results found (empty, or written by another tool?)")
    return rows
