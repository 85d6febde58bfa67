"""Scenarios `agent_task_baseline_v1` and `agent_task_oak_local_v1`.

The baseline is a cold workspace (a fresh full clone) and then a warm one (a
worktree sharing the cold clone's object store), each taken through branch,
inspect, edit, checkpoint, publish and review hand-off, as the flow's
`[agent_task]` lists them. Hosted CI cannot be observed on these remotes: it
is an unmeasured step with its reason, so the total says its coverage is
incomplete instead of pretending. The oracle reads each phase's payload back
from a fresh clone of its branch.

The oak-local variant runs two fresh oak clones against an owned loopback
`oak serve`; it needs an oak binary and is a skip row without one.
"""

from __future__ import annotations

import json
import shutil
from typing import Any

from orchard.bench import rows
from orchard.bench.flows import Flow, Probe
from orchard.bench.lanes.steps import LaneContext, Recorder, Row, fail
from orchard.bench.lanes.task_loop import (
    network_totals,
    oracle_method,
    phase_values,
    start,
)
from orchard.bench.lanes.transport import LOOPBACK, Remote, free_port, wait_for_port
from orchard.bench.subjects import Subject

SCENARIO = "agent_task_baseline_v1"
TOTAL = "agent_task.total"
OAK_LOCAL_SCENARIO = "agent_task_oak_local_v1"
OAK_LOCAL_TOTAL = "agent_task_oak_local.total"
FIXTURE_ID = "agent-task-seed-v1"
ACQUISITION_MODELS = {"cold": "fresh_full_clone", "warm": "shared_object_worktree"}


def run(ctx: LaneContext, subject: Subject, flow: Flow, remote: Remote, run_index: int) -> Row:
    """Cold clone plus warm worktree for one subject; returns its total row."""
    root, rec, values = start(ctx, subject, SCENARIO, run_index, remote, FIXTURE_ID)
    phases = list(flow.agent_task)
    values["base"] = str(root / phases[0])
    completed: list[dict[str, Any]] = []
    for phase in phases:
        phased = phase_values(values, flow, phase, root / phase)
        ok = True
        for command in flow.agent_task[phase]:
            row = rec.command(f"{phase}.{command.name}", command, phased, extra={"phase": phase})
            if rows.is_failure(row):
                ok = False
                break
        if not ok:
            break
        completed.append(phased)
    oracle = {
        phased["phase"]: rec.verify_payload(flow, phased, root / f"verify-{phased['phase']}")
        for phased in completed
    }
    oracle_ok = len(completed) == len(phases) and all(oracle.values())
    total = rec.total(
        TOTAL,
        oracle_payload_on_remote_branch=oracle_ok,
        oracle_by_phase=oracle,
        oracle_method=oracle_method(flow),
        flow_notes=flow.notes,
        acquisition_models={phase: ACQUISITION_MODELS.get(phase, "as the flow says") for phase in phases},
        os_cache_state="unknown",
        os_cache_state_reason="page cache neither purged nor instrumented",
        human_action_count=0,
        **network_totals(rec.counted, remote),
    )
    if not oracle_ok and total["returncode"] == 0:
        fail(total, "oracle: a phase's payload is missing from its pushed branch")
    shutil.rmtree(root, ignore_errors=True)
    return rec.emit_total(total)


def run_oak_local(ctx: LaneContext, subject: Subject, run_index: int) -> Row:
    """Two fresh oak clones against an owned loopback `oak serve` (oak subjects only)."""
    root = ctx.root / f"oak-local-{subject.name}-r{run_index}"
    server_dir = root / "server"
    server_dir.mkdir(parents=True)
    rec = Recorder(
        ctx,
        subject,
        OAK_LOCAL_SCENARIO,
        run_index,
        fields={
            "remote_transport": "loopback_http",
            "remote_server": LOOPBACK,
            "benchmark_track": "oak-local-loopback",
        },
        fixture_id="agent-task-oak-local-v1",
    )
    oak = str(subject.bin)
    port = free_port()
    remote = f"http://{LOOPBACK}:{port}"
    rec.stand_ins = rec.stand_ins.merged({remote: "REMOTE"})
    repo = f"qa/task-loop-{subject.name}-r{run_index}"
    server = ctx.servers.start([oak, "serve", "--dir", str(server_dir), "--host", LOOPBACK, "--port", str(port)], root)
    failure: str | None = None if wait_for_port(port, server.alive) else "oak serve did not listen on its port"
    seed = root / "seed"
    payload_text = "# task notes\n"
    branch: str | None = None
    expected_head: str | None = None
    if failure is None:
        seed.mkdir()
        (seed / "task-notes.md").write_text(payload_text)
        for operation, argv in (
            ("setup.seed_init", [oak, "init", "."]),
            ("setup.seed_commit", [oak, "commit"]),
            ("setup.seed_push", [oak, "push", "--repo", repo, "--remote", remote]),
        ):
            if not rec.harness(operation, argv, seed).ok:
                failure = f"{operation} failed"
                break
    for phase in ("cold", "followup"):
        if failure is not None:
            break
        workspace = root / phase
        clone = [oak, "clone", repo, str(workspace), "--remote", remote, "--allow-legacy-scope"]
        if phase == "followup" and branch:
            clone += ["--branch", branch]
        if rows.is_failure(rec.execute(f"{phase}.acquire", clone, root)):
            failure = f"{phase}.acquire failed"
            break
        rec.execute(f"{phase}.inspect", [oak, "status", "--json"], workspace)
        if branch is None:
            status = _json_object(rec.last_capture.stdout_text if rec.last_capture else "")
            branch = status.get("branch") if isinstance(status.get("branch"), str) else None
            if branch is None:
                failure = "cold.inspect did not name the branch"
                break
        line = f"{phase} task run={run_index} bench={ctx.bench_id}"
        payload_text += line + "\n"
        rec.execute(
            f"{phase}.edit",
            ["/bin/sh", "-c", 'printf "%s\\n" "$1" >> task-notes.md', "edit", line],
            workspace,
            kind="edit",
        )
        for operation, argv in (
            (f"{phase}.checkpoint", [oak, "commit"]),
            (f"{phase}.publish", [oak, "push", "--repo", repo, "--remote", remote]),
        ):
            if rows.is_failure(rec.execute(operation, argv, workspace)):
                failure = f"{operation} failed"
                break
        expected_head = rec.probe(f"{phase}.head", Probe((oak, "hash")), {"workspace": str(workspace)})
        rec.unmeasured(f"{phase}.ci.observe", "owned loopback oak serve has no CI provider")
        rec.unmeasured(f"{phase}.review_handoff", "owned loopback oak serve has no hosted review")
    payload_ok = head_ok = False
    if failure is None and branch:
        verifier = root / "verifier"
        clone = [oak, "clone", repo, str(verifier), "--remote", remote, "--branch", branch, "--allow-legacy-scope"]
        if rec.harness("verify.clone", clone, root).ok:
            notes = verifier / "task-notes.md"
            payload_ok = notes.is_file() and notes.read_text() == payload_text
            head_ok = expected_head is not None and expected_head == rec.probe(
                "verify.head", Probe((oak, "hash")), {"workspace": str(verifier)}
            )
    stopped = server.stop()
    total = rec.total(
        OAK_LOCAL_TOTAL,
        oracle_payload_on_remote_branch=payload_ok and head_ok,
        oracle_payload_matches=payload_ok,
        oracle_branch_head_matches=head_ok,
        server_process_stopped=stopped,
        acquisition_models={"cold": "fresh_full_clone", "followup": "second_fresh_full_clone"},
        network_bytes=None,
        network_bytes_reason="loopback oak serve is not observed by a byte proxy",
    )
    reason = failure or (None if payload_ok and head_ok else "oracle: payload or head differs on the server")
    if reason or not stopped:
        fail(total, reason or "oak serve did not stop")
    shutil.rmtree(root, ignore_errors=True)
    return rec.emit_total(total)


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
