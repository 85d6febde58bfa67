"""The task-loop lane's Markdown summary: the loop's steps, the agent task and the interrupted publication, one
section each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from orchard.bench.lanes import agent_task, interrupted, materialization, task_loop
from orchard.bench.lanes.summary import (
    notes_section,
    oracle_cell,
    skips_and_failures,
    subjects_section,
    summarized,
    table,
    warmup_line,
)
from orchard.bench.measuring import rows

HEADER = [
    "# Task loop summary",
    "",
    "Whole-task cost of an agent's loop: acquire a workspace, inspect, edit, snapshot,",
    "publish, describe, end; then a follow-up task in a fresh workspace, with each",
    "subject's commands taken from its flow. Command sequences are not step-equivalent",
    "across subjects: the flows' notes below say where they differ. Latency is compared",
    "only between rows of the same transport; across transports only tool calls and",
    "estimated tokens are comparable.",
]


def _totals(all_rows: Sequence[Mapping[str, Any]], operation: str) -> list[Mapping[str, Any]]:
    return [row for row in all_rows if row.get("operation") == operation]


def summary(recorded: Sequence[Mapping[str, Any]]) -> str:
    """The lane's Markdown summary: one section per scenario that produced totals."""
    lines = list(HEADER)
    all_rows = summarized(recorded)
    machine = next((row.get("machine_fingerprint") for row in recorded), None)
    lock = next((row.get("measurement_lock") for row in recorded), None)
    lines += ["", f"Machine fingerprint `{machine}`; measurement lock {lock}."]
    lines += warmup_line(recorded)
    lines += subjects_section(recorded)
    lines += [""]
    lines += _loop_section(all_rows)
    lines += _agent_section(all_rows)
    lines += materialization.summary_section(_totals(all_rows, materialization.TOTAL))
    lines += _interrupted_section(all_rows)
    lines += notes_section(all_rows)
    lines += skips_and_failures(recorded)
    return "\n".join(lines) + "\n"


def _loop_section(all_rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The task_loop table, runs grouped by transport."""
    loop = sorted(_totals(all_rows, task_loop.TOTAL), key=lambda r: (str(r.get("remote_transport")), r["run"]))
    if not loop:
        return []
    lines: list[str] = []
    transports = sorted({str(r.get("remote_transport")) for r in loop})
    lines += ["## task_loop", ""]
    if len(transports) > 1:
        lines += [
            f"Transports in this table: {', '.join(transports)}. Wall ms, warm delta and network",
            "bytes compare only within one transport; tool calls and tokens compare across them.",
            "",
        ]
    lines += table(
        (
            "Subject",
            "Run",
            "Transport",
            "Wall ms",
            "Tool calls",
            "Est. tokens",
            "Describe calls",
            "Warm delta ms",
            "Network bytes",
            "Oracle",
        ),
        (
            (
                f"`{r['subject']}`",
                r["run"],
                r.get("remote_transport"),
                r.get("elapsed_ms"),
                r.get("tool_call_count"),
                r.get("estimated_total_tokens"),
                r.get("describe_calls"),
                r.get("followup_warm_delta_ms"),
                r.get("network_bytes"),
                oracle_cell(r.get("oracle_payload_on_remote_branch")),
            )
            for r in loop
        ),
    )
    return lines


def _agent_section(all_rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The agent_task table: each flow's phases."""
    agent = _totals(all_rows, agent_task.TOTAL) + _totals(all_rows, agent_task.OAK_LOCAL_TOTAL)
    if not agent:
        return []
    lines: list[str] = []
    lines += [
        "",
        "## agent_task",
        "",
        "The phases of each flow's [agent_task] (for git: cold, a fresh full clone; warm, a",
        "worktree sharing the cold clone's objects). Hosted CI is unmeasured here (coverage partial).",
        "",
    ]
    lines += table(
        (
            "Subject",
            "Scenario",
            "Run",
            "Transport",
            "Wall ms",
            "Tool calls",
            "Est. tokens",
            "Output bytes",
            "Coverage",
            "Oracle",
        ),
        (
            (
                f"`{r['subject']}`",
                r["scenario"],
                r["run"],
                r.get("remote_transport"),
                r.get("elapsed_ms"),
                r.get("tool_call_count"),
                r.get("estimated_total_tokens"),
                (r.get("stdout_bytes") or 0) + (r.get("stderr_bytes") or 0),
                "complete" if r.get("coverage_complete") else "partial",
                oracle_cell(r.get("oracle_payload_on_remote_branch")),
            )
            for r in agent
        ),
    )
    return lines


def _interrupted_section(all_rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The interrupted publication table: what the CLI claimed beside what the fixture saw."""
    broken = _totals(all_rows, interrupted.TOTAL)
    if not broken:
        return []
    lines: list[str] = []
    lines += [
        "",
        "## interrupted_publication_after_request_v1",
        "",
        "The fixture reads one complete publication request and hangs up without answering.",
        "What the CLI claimed and what the fixture saw are separate columns; the harness never retries.",
        "",
    ]
    lines += table(
        (
            "Subject",
            "Run",
            "CLI exit",
            "CLI claim",
            "Fixture saw",
            "Requests",
            "Request bytes",
            "Head kept",
            "Work kept",
            "Result",
        ),
        (
            (
                f"`{r['subject']}`",
                r["run"],
                r.get("cli_returncode"),
                r.get("publication_outcome"),
                r.get("fixture_delivery_state"),
                r.get("mutation_requests_observed"),
                r.get("network_request_bytes_observed"),
                r.get("local_head_preserved"),
                r.get("local_work_preserved"),
                "pass" if not rows.is_failure(r) else "FAIL",
            )
            for r in broken
        ),
    )
    return lines
