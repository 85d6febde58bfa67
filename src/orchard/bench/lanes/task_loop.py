"""Scenario `task_loop`: the agent's whole task, then a follow-up task.

Each phase acquires a fresh workspace, inspects, edits, snapshots, publishes
and ends it (the task phase also describes itself where the CLI needs a
separate call). The follow-up's acquire minus the task's is the warm delta.
The oracle is untimed: each phase's payload must be on its pushed branch,
read back through the flow's verify commands (a fresh clone). An oracle
failure fails the total row.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from orchard.bench.lanes.steps import LaneContext, Recorder, Row, fail
from orchard.bench.lanes.transport import Remote
from orchard.bench.measuring import rows
from orchard.bench.suites.flows import STEPS, Flow
from orchard.bench.suites.subjects import Subject

SCENARIO = "task_loop"
PHASES = ("task", "followup")
DESCRIBED_PHASE = "task"
TOTAL = "task_loop.total"
FIXTURE_ID = "task-loop-seed-v1"


def base_values(ctx: LaneContext, subject: Subject, remote: Remote, run: int, root: Path) -> dict[str, Any]:
    return {
        "bin": str(subject.bin),
        "root": str(root),
        "base": str(root / "base"),
        "remote": remote.url,
        "repo": remote.repo or "",
        "run": run,
        "bench_id": ctx.bench_id,
        "subject": subject.name,
        # set-up commands (prepare) run before any phase: they see the base checkout
        "phase": "setup",
        "workspace": str(root / "base"),
    }


def start(
    ctx: LaneContext, subject: Subject, scenario: str, run_index: int, remote: Remote, fixture_id: str
) -> tuple[Path, Recorder, dict[str, Any]]:
    """A scenario run against a remote: its own folder, its recorder, its template values."""
    root = ctx.root / f"{scenario}-{subject.name}-r{run_index}"
    root.mkdir(parents=True)
    rec = Recorder(
        ctx, subject, scenario, run_index,
        fields={**remote.row_fields(), "benchmark_track": track(remote)},
        fixture_id=fixture_id, proxy=remote.proxy, stand_ins={remote.url: "REMOTE"},
    )
    return root, rec, base_values(ctx, subject, remote, run_index, root)


def phase_values(values: dict[str, Any], flow: Flow, phase: str, workspace: Path) -> dict[str, Any]:
    payload = f"payload {phase} run={values['run']} bench={values['bench_id']} subject={values['subject']}"
    phased = {
        **values,
        "phase": phase,
        "workspace": str(workspace),
        "payload": payload,
        "message": f"bench task loop {values['bench_id']} r{values['run']} {phase}",
    }
    phased["branch"] = flow.branch_template.format_map(phased) if flow.branch_template else ""
    return phased


def warm_fields(counted: list[Row]) -> dict[str, Any]:
    """Follow-up versus task: the warm-cache story in numbers."""
    def acquire_ms(phase: str) -> float | None:
        for row in counted:
            if row.get("operation") == f"{phase}.acquire" and not rows.is_failure(row):
                return float(row["elapsed_ms"])
        return None

    def phase_ms(phase: str) -> float:
        return round(sum(float(r.get("elapsed_ms") or 0) for r in counted if r.get("phase") == phase), 3)

    task, followup = acquire_ms("task"), acquire_ms("followup")
    return {
        "task_phase_ms": phase_ms("task"),
        "followup_phase_ms": phase_ms("followup"),
        "acquire_ms_task": task,
        "acquire_ms_followup": followup,
        "followup_warm_delta_ms": None if task is None or followup is None else round(followup - task, 3),
    }


def run(ctx: LaneContext, subject: Subject, flow: Flow, remote: Remote, run_index: int) -> Row:
    """One task loop for one subject; returns its total row (already written)."""
    root, rec, values = start(ctx, subject, SCENARIO, run_index, remote, FIXTURE_ID)
    for index, command in enumerate(flow.prepare):
        capture = rec.flow_harness(f"setup.prepare.{index}", command, values)
        if not capture.ok:
            total = fail(rec.total(TOTAL), f"flow prepare failed: {capture.stderr_text.strip()[-300:]}")
            return rec.emit_total(total)
    branches, completed = _phases(rec, flow, values, root)
    oracle: dict[str, bool | None] = {}
    for phase, phased in completed.items():
        verifier = root / f"verify-{phase}"
        oracle[phase] = rec.verify_payload(flow, phased, verifier) if phased["branch"] else None
        shutil.rmtree(verifier, ignore_errors=True)
    # A phase that never completed published nothing the oracle could find.
    results = [oracle.get(phase, False) for phase in PHASES]
    oracle_ok = False if False in results else (None if None in results else True)
    total = rec.total(
        TOTAL,
        oracle_payload_on_remote_branch=oracle_ok,
        oracle_by_phase=oracle,
        workspace_branches=branches,
        oracle_method=oracle_method(flow),
        describe_note=flow.notes.get("describe"),
        flow_notes=flow.notes,
        describe_calls=len(flow.step("describe")),
        flow_steps_without_calls=[step for step in STEPS if not flow.step(step)],
        **warm_fields(rec.counted),
        **network_totals(rec.counted, remote),
    )
    if oracle_ok is False and total["returncode"] == 0:
        fail(total, "oracle: a phase's payload is missing from its pushed branch")
    return rec.emit_total(total)


def _phases(rec: Recorder, flow: Flow, values: dict[str, Any],
            root: Path) -> tuple[dict[str, str | None], dict[str, dict[str, Any]]]:
    """Each phase's steps in turn until one fails: the branch each phase worked on, and the phases that completed
    (a workspace left open by a failure is cleaned up by the flow's `cleanup`)."""
    branches: dict[str, str | None] = {}
    completed: dict[str, dict[str, Any]] = {}
    open_workspaces: list[dict[str, Any]] = []
    try:
        for phase in PHASES:
            phased = phase_values(values, flow, phase, root / phase)
            if not rec.flow_step(phase, "acquire", flow.step("acquire"), phased):
                break
            open_workspaces.append(phased)
            if flow.branch_probe is not None:
                phased["branch"] = rec.probe(f"{phase}.branch_probe", flow.branch_probe, phased) or ""
            branches[phase] = phased["branch"] or None
            steps = ["inspect", "edit", "snapshot", "publish", *(["describe"] if phase == DESCRIBED_PHASE else []),
                     "end"]
            if not all(rec.flow_step(phase, step, flow.step(step), phased) for step in steps):
                break
            open_workspaces.remove(phased)
            completed[phase] = phased
    finally:
        for phased in open_workspaces:
            for command in flow.cleanup:
                rec.flow_harness(f"{phased['phase']}.cleanup", command, phased)
    return branches, completed


def oracle_method(flow: Flow) -> str:
    if flow.harness_verifies:
        return "the harness's own git clones each pushed branch; payload grep"
    return "the flow's verify commands fetch each pushed branch; payload grep"


def track(remote: Remote) -> str:
    """Which comparison a row belongs to (seed vocabulary)."""
    return "core-equivalent" if remote.transport == "local_file" else "agent-default"


def network_totals(counted: list[Row], remote: Remote) -> dict[str, Any]:
    """Summed proxy counts, or null with the reason when no proxy saw the traffic."""
    if remote.proxy is None:
        reason = f"{remote.transport} transport is not observed by a byte proxy"
        return {"network_bytes": None, "network_bytes_reason": reason}
    up = sum(int(r.get("network_client_to_server_bytes") or 0) for r in counted)
    down = sum(int(r.get("network_server_to_client_bytes") or 0) for r in counted)
    return {
        "network_bytes": up + down,
        "network_client_to_server_bytes": up,
        "network_server_to_client_bytes": down,
        "network_connections": sum(int(r.get("network_connections") or 0) for r in counted),
    }
