"""The worker's report: a JSON file with a documented schema.

A worker writes it before it ends; the collector reads it back. Nothing is
ever filled in for the worker: a report that is absent is recorded as
`missing`, one that is not JSON as `malformed`, one that breaks the schema
as `invalid` with every problem named, and in those cases the raw text (if
any) is kept as it was.

The file is foreign: it is opened as a regular file only (never through a
symlink, never a FIFO or device, so nothing outside the checkout is read and
nothing hangs), and read up to `MAX_REPORT_BYTES` (1 MiB). Anything else, a
larger file or JSON nested too deep to parse, is `unreadable` with the
reason, and its text is not kept.

Schema (`orchard.worker-report/1`), fields other than these are kept as
they are:

| field | type | required | meaning |
| --- | --- | --- | --- |
| `schema` | string | yes | `orchard.worker-report/1` |
| `experiment` | string | yes | the experiment's name, as in the prompt |
| `status` | string | yes | `done` (change made, built, tested, measured), `failed`, or `gave-up` |
| `summary` | string | yes | what was changed and why, in plain words |
| `measurements` | list | yes | one object per metric measured (may be empty) |
| `changed_files` | list of strings | no | files the worker changed, relative to its checkout |
| `build`, `tests`, `measure` | object or null | no | a step: `command` (string), `exit_code` (int or null), `output` |
| `notes` | string | no | anything else the lab should know |

A measurement: `metric` (string, required), `before`, `after` (numbers or
null), `n` (integer or null: pairs or runs behind the numbers),
`noise_floor` (number or null), `cleared_noise_floor` (true, false or null).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from orchard.lab.records.report_reading import ReportReading, ReportState

SCHEMA = "orchard.worker-report/1"
MAX_REPORT_BYTES = 1 << 20
STATUSES = ("done", "failed", "gave-up")
_NUMBER = (int, float)

EXAMPLE: dict[str, Any] = {
    "schema": SCHEMA,
    "experiment": "<experiment>",
    "status": "done",
    "summary": "Cached the parsed index between calls; the metric dropped by 12%.",
    "changed_files": ["src/index.rs"],
    "build": {"command": "cargo build --release", "exit_code": 0},
    "tests": {"command": "cargo test", "exit_code": 0},
    "measurements": [
        {
            "metric": "tokens_total",
            "before": 1840,
            "after": 1620,
            "n": 10,
            "noise_floor": 0.03,
            "cleared_noise_floor": True,
        }
    ],
    "notes": "",
}


def _is_number(value: Any) -> bool:
    return isinstance(value, _NUMBER) and not isinstance(value, bool)


def _check_step(name: str, step: Any) -> list[str]:
    if step is None:
        return []
    if not isinstance(step, dict):
        return [f"{name}: expected an object or null"]
    problems = []
    if not isinstance(step.get("command"), str):
        problems.append(f"{name}.command: expected a string")
    code = step.get("exit_code")
    if code is not None and (not isinstance(code, int) or isinstance(code, bool)):
        problems.append(f"{name}.exit_code: expected an integer or null")
    return problems


def _check_measurement(index: int, item: Any) -> list[str]:
    name = f"measurements[{index}]"
    if not isinstance(item, dict):
        return [f"{name}: expected an object"]
    problems = []
    if not isinstance(item.get("metric"), str) or not item.get("metric"):
        problems.append(f"{name}.metric: expected a non-empty string")
    for key in ("before", "after", "noise_floor"):
        if item.get(key) is not None and not _is_number(item[key]):
            problems.append(f"{name}.{key}: expected a number or null")
    n = item.get("n")
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 0):
        problems.append(f"{name}.n: expected a non-negative integer or null")
    cleared = item.get("cleared_noise_floor")
    if cleared is not None and not isinstance(cleared, bool):
        problems.append(f"{name}.cleared_noise_floor: expected true, false or null")
    return problems


def validate(data: Any, experiment: str | None = None) -> list[str]:
    """Every way `data` breaks the schema (empty: it is a valid report)."""
    if not isinstance(data, dict):
        return ["the report must be a JSON object"]
    problems: list[str] = []
    if data.get("schema") != SCHEMA:
        problems.append(f"schema: expected {SCHEMA!r}, got {data.get('schema')!r}")
    if not isinstance(data.get("experiment"), str):
        problems.append("experiment: expected a string")
    elif experiment is not None and data["experiment"] != experiment:
        problems.append(f"experiment: {data['experiment']!r} is not this experiment ({experiment!r})")
    if data.get("status") not in STATUSES:
        problems.append(f"status: expected one of {', '.join(STATUSES)}, got {data.get('status')!r}")
    if not isinstance(data.get("summary"), str):
        problems.append("summary: expected a string")
    measurements = data.get("measurements")
    if not isinstance(measurements, list):
        problems.append("measurements: expected a list (empty if nothing was measured)")
    else:
        for index, item in enumerate(measurements):
            problems += _check_measurement(index, item)
    files = data.get("changed_files")
    if files is not None and (not isinstance(files, list) or not all(isinstance(f, str) for f in files)):
        problems.append("changed_files: expected a list of strings")
    for step in ("build", "tests", "measure"):
        problems += _check_step(step, data.get(step))
    if data.get("notes") is not None and not isinstance(data.get("notes"), str):
        problems.append("notes: expected a string")
    return problems


def _read_regular(path: Path) -> str:
    """The text of a regular file no larger than the cap; OSError or ValueError naming why not."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file")
        if info.st_size > MAX_REPORT_BYTES:
            raise ValueError(f"{info.st_size:,} bytes, over the {MAX_REPORT_BYTES:,}-byte cap")
        data = os.read(descriptor, MAX_REPORT_BYTES + 1)
    finally:
        os.close(descriptor)
    if len(data) > MAX_REPORT_BYTES:
        raise ValueError(f"over the {MAX_REPORT_BYTES:,}-byte cap")
    return data.decode("utf-8")


def read_report(path: Path, experiment: str | None = None) -> ReportReading:
    """Read a worker's report as it is, never repairing or inventing it, never following it anywhere."""
    path = Path(path)
    try:
        raw = _read_regular(path)
    except FileNotFoundError:
        return ReportReading(ReportState.MISSING, str(path), problems=["the worker wrote no report"])
    except OSError as error:
        why = "a symlink" if path.is_symlink() else error.strerror or str(error)
        return ReportReading(ReportState.UNREADABLE, str(path), problems=[f"report unreadable: {why}"])
    except (ValueError, UnicodeDecodeError) as error:
        return ReportReading(ReportState.UNREADABLE, str(path), problems=[f"report unreadable: {error}"])
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as error:
        return ReportReading(ReportState.MALFORMED, str(path), problems=[f"not JSON: {error}"], raw=raw)
    except RecursionError:
        return ReportReading(ReportState.UNREADABLE, str(path), problems=["report unreadable: JSON nested too deep"])
    problems = validate(data, experiment)
    if problems:
        return ReportReading(ReportState.INVALID, str(path), problems=problems, raw=raw)
    return ReportReading(ReportState.OK, str(path), report=data, raw=raw)


def write_report(path: Path, report: dict[str, Any]) -> None:
    """Write a report (used by the patch worker); it must pass the schema first."""
    problems = validate(report)
    if problems:
        raise ValueError("refusing to write an invalid report: " + "; ".join(problems))
    Path(path).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
