"""Rows: one JSON object per measured step.

Field names follow the seed harness. `returncode` 0 is success, 77 is a skip
row that carries `skip_reason`, anything else a failure. `None` (JSON null)
means unmeasured, never zero. Every row carries the comparability keys; two
rows may be compared only if all of them match.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from orchard.bench.machine import machine_fingerprint
from orchard.bench.measuring import tokens
from orchard.bench.sandbox.environment import ENV_ISOLATION_VERSION
from orchard.process import Capture, command_display

SCHEMA_VERSION = 1
SKIP_RETURNCODE = 77

COMPARABILITY_KEYS = (
    "remote_transport",
    "instruction_level",
    "fixture_id",
    "env_isolation_version",
    "machine_fingerprint",
)

Row = dict[str, Any]


def comparability(
    *,
    remote_transport: str | None = None,
    instruction_level: str | None = None,
    fixture_id: str | None = None,
    env_isolation: str = ENV_ISOLATION_VERSION,
) -> dict[str, Any]:
    """The comparability keys for rows taken here, now (`env_isolation`: how the runs were confined)."""
    return {
        "remote_transport": remote_transport,
        "instruction_level": instruction_level,
        "fixture_id": fixture_id,
        "env_isolation_version": env_isolation,
        "machine_fingerprint": machine_fingerprint(),
    }


COMMIT_VARIABLES = ("ORCHARD_COMMIT", "GITHUB_SHA")  # the commit measured, as CI names it


def source_commit() -> dict[str, str]:
    """`{"commit": ...}` when the environment names the commit the measured binary was built from (`orchard
    history` places each run at its commit), else nothing."""
    commit = next((os.environ[name] for name in COMMIT_VARIABLES if os.environ.get(name)), None)
    return {} if commit is None else {"commit": commit}


def base_row(
    *, subject: Mapping[str, Any], scenario: str, operation: str, run: int, metadata: Mapping[str, Any], step_kind: str
) -> Row:
    """What every row starts with: schema, the run's metadata, the subject, where in the run it is."""
    return {
        "schema": SCHEMA_VERSION,
        **metadata,
        "subject": subject["name"],
        "subject_kind": subject.get("kind"),
        "subject_label": subject.get("label", subject["name"]),
        "scenario": scenario,
        "run": run,
        "operation": operation,
        "step_kind": step_kind,
    }


def step_row(
    capture: Capture,
    *,
    subject: Mapping[str, Any],
    scenario: str,
    operation: str,
    run: int,
    metadata: Mapping[str, Any],
    step_kind: str = "vcs",
    expected_returncodes: Sequence[int] = (0,),
    tool_calls: int = 1,
    stand_ins: tokens.StandIns = tokens.NO_STAND_INS,
) -> Row:
    """A row for one measured command (one tool call an agent would make).

    Tokens are counted on the command and output with `stand_ins` applied: a
    baseline and a candidate are the same tool at different paths, so their
    calls must cost the same.
    """
    returncode = _recorded_returncode(capture, expected_returncodes)
    row: Row = {
        **base_row(
            subject=subject, scenario=scenario, operation=operation, run=run, metadata=metadata, step_kind=step_kind
        ),
        "elapsed_ms": round(capture.elapsed_ms, 3),
        "cpu_ms": None if capture.cpu_ms is None else round(capture.cpu_ms, 3),
        "peak_rss_bytes": capture.peak_rss_bytes,
        "returncode": returncode,
        "process_returncode": capture.returncode,
        "timed_out": capture.timed_out,
        "command": command_display(capture.command),
        "tool_call_count": tool_calls,
        "started_at": capture.started_at,
        "ended_at": capture.ended_at,
        **tokens.interaction_fields(
            stand_ins.command(capture.command),
            stand_ins.text(capture.stdout_text),
            stand_ins.text(capture.stderr_text),
            stdout_bytes=capture.stdout_bytes,
            stderr_bytes=capture.stderr_bytes,
            stdout_truncated=capture.stdout_truncated,
            stderr_truncated=capture.stderr_truncated,
        ),
    }
    if returncode:
        row["stderr_tail"] = capture.stderr_text[-2000:]
    return row


def _recorded_returncode(capture: Capture, expected_returncodes: Sequence[int]) -> int:
    """0 for an expected exit, else the process's code, or 1 for none. A command that fails with 77 is a failure,
    not a skip: skips carry a reason and come from skip_row. The process's own code stays in process_returncode."""
    if not capture.timed_out and capture.returncode in expected_returncodes:
        return 0
    return 1 if capture.returncode in (None, 0, SKIP_RETURNCODE) else capture.returncode


def skip_row(
    *,
    subject: Mapping[str, Any],
    scenario: str,
    operation: str,
    run: int,
    metadata: Mapping[str, Any],
    reason: str,
) -> Row:
    """A step or scenario that was not measured, and why (never silent absence)."""
    return {
        **base_row(
            subject=subject, scenario=scenario, operation=operation, run=run, metadata=metadata, step_kind="skip"
        ),
        "elapsed_ms": None,
        "returncode": SKIP_RETURNCODE,
        "timed_out": False,
        "command": None,
        "skip_reason": reason,
        "tool_call_count": 0,
    }


def is_failure(row: Mapping[str, Any]) -> bool:
    return row.get("returncode") not in (0, SKIP_RETURNCODE)


def is_skip(row: Mapping[str, Any]) -> bool:
    return row.get("returncode") == SKIP_RETURNCODE


def total_row(
    rows: Sequence[Mapping[str, Any]],
    *,
    subject: Mapping[str, Any],
    scenario: str,
    operation: str,
    run: int,
    metadata: Mapping[str, Any],
) -> Row:
    """Sum step rows into one total: fails if any step failed; lists what was unmeasured."""
    measured = [row for row in rows if not is_skip(row)]
    unmeasured = [str(row["operation"]) for row in rows if is_skip(row)]
    phase_ms: dict[str, float] = {}
    for row in measured:
        phase = str(row.get("operation", "unknown")).split(".", 1)[0]
        phase_ms[phase] = round(phase_ms.get(phase, 0.0) + float(row.get("elapsed_ms") or 0.0), 3)
    elapsed = [float(row["elapsed_ms"]) for row in measured if row.get("elapsed_ms") is not None]
    return {
        **base_row(
            subject=subject, scenario=scenario, operation=operation, run=run, metadata=metadata, step_kind="total"
        ),
        "elapsed_ms": round(sum(elapsed), 3) if elapsed else None,
        "returncode": 1 if any(is_failure(row) for row in rows) else 0,
        "timed_out": any(bool(row.get("timed_out")) for row in rows),
        "coverage_complete": not unmeasured,
        "unmeasured_operations": unmeasured,
        "phase_elapsed_ms": phase_ms,
        "command": [row.get("command") for row in measured],
        "tool_call_count": sum(int(row.get("tool_call_count") or 0) for row in rows),
        "summarized_operations": [row.get("operation") for row in rows],
        **tokens.summed_fields(measured),
    }


def failures(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [row for row in rows if is_failure(row)]
