"""Scenarios `agent_task_baseline_v1` and `agent_task_oak_local_v1`.

The baseline is a cold workspace (a fresh full clone) and then a warm one (a
worktree sharing the cold clone's object store), each taken through branch,
inspect, edit, checkpoint, publish and review hand-off, as the flow's
`[agent_task]` lists them. Hosted CI cannot be observed on these remotes: it
is an unmeasured step with its reason, so the total says its coverage is
incomplete instead of pretending. The oracle reads each phase's payload back
from a fresh clone of its branch.

`agent_task_oak_local_v1` (named after the first CLI that needed it) runs
the phases of a flow's `[served]` table against a server the lane starts
from the flow's own `serve` command on loopback: for oak, two fresh clones
against `oak serve`. Any CLI whose flow has `[served]` enters it; others get
a skip row naming the missing keys.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orchard.bench.lanes.steps import LaneContext, Recorder, Row, fail
from orchard.bench.lanes.task_loop import (
    network_totals,
    oracle_method,
    phase_values,
    start,
)
from orchard.bench.lanes.transport import LOOPBACK, Remote, free_port, wait_for_port
from orchard.bench.measuring import rows
from orchard.bench.suites.flows import Command, Flow
from orchard.bench.suites.subjects import Subject

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


def _seed(rec: Recorder, flow: Flow, values: dict[str, Any], seed: Path, payload_text: str) -> str | None:
    """The payload file written and published by the flow's `seed` commands; or why not."""
    seed.mkdir()
    (seed / flow.payload_file).write_text(payload_text)
    for index, command in enumerate(flow.served.seed):
        if not rec.flow_harness(f"setup.seed.{index}", command, values).ok:
            return f"[served] seed command {index} failed"
    return None


def _served_phase(rec: Recorder, flow: Flow, values: dict[str, Any], phased: dict[str, Any],
                  commands: Sequence[Command]) -> str | None:
    """One phase's commands; the branch read after the first acquire is kept in `values`. Returns why it failed."""
    phase = phased["phase"]
    for command in commands:
        row = rec.command(f"{phase}.{command.name}", command, phased, extra={"phase": phase})
        if rows.is_failure(row):
            return f"{phase}.{command.name} failed"
        if command.name == "acquire" and not values["branch"] and flow.served.branch is not None:
            values["branch"] = phased["branch"] = rec.probe(f"{phase}.branch", flow.served.branch, phased) or ""
            if not values["branch"]:
                return f"{phase}: the flow's [served] branch probe read no branch"
    return None


def _served_oracle(ctx: LaneContext, rec: Recorder, flow: Flow, values: dict[str, Any], verifier: Path,
                   payload_text: str, expected_head: str | None) -> tuple[bool, bool]:
    """(the payload file is what the phases wrote, the head is the last phase's), fetched into `verifier`."""
    checked = {**values, "phase": "verify", "workspace": str(verifier)}
    if not _fetched(ctx, rec, flow, checked):
        return False, False
    notes = verifier / flow.payload_file
    payload_ok = notes.is_file() and notes.read_text() == payload_text
    head: str | None
    if flow.harness_verifies:
        head = rec.harness("verify.head", [ctx.git, "rev-parse", "HEAD"], verifier).stdout_text.strip()
    else:
        head = rec.probe("verify.head", flow.probes["head"], checked)
    return payload_ok, expected_head is not None and expected_head == head


SERVED_NEEDS = ("[served] serve", "[served] seed", "[served] branch", "[probes] head")


def run_served(ctx: LaneContext, subject: Subject, flow: Flow, run_index: int) -> Row:
    """The flow's `[served]` phases against a server the lane starts from the flow's `serve` command.

    The seed directory holds the payload file; the flow's `seed` commands
    publish it as {repo}. Every phase appends its own line to the payload and
    publishes; the oracle fetches the branch (the harness's own git from the
    flow's `url` for a git remote, else the flow's `verify` commands): the
    payload file must be exactly what the phases wrote and the head the last
    phase's head.
    """
    root = ctx.root / f"served-{subject.name}-r{run_index}"
    server_dir = root / "server"
    server_dir.mkdir(parents=True)
    port = free_port()
    scheme = flow.served_scheme
    remote = f"{scheme}://{LOOPBACK}:{port}"
    rec = Recorder(ctx, subject, OAK_LOCAL_SCENARIO, run_index,
                   fields={"remote_transport": f"loopback_{scheme}", "remote_server": LOOPBACK,
                           "benchmark_track": "owned-loopback"},
                   fixture_id="agent-task-owned-loopback-v1", stand_ins={remote: "REMOTE"})
    values: dict[str, Any] = {
        "bin": str(subject.bin), "root": str(root), "base": str(root), "server_dir": str(server_dir),
        "host": LOOPBACK, "port": port, "remote": remote, "repo": f"qa/task-loop-{subject.name}-r{run_index}",
        "run": run_index, "bench_id": ctx.bench_id, "subject": subject.name, "phase": "setup",
        "workspace": str(root / "seed"), "verifier": str(root / "verifier"), "branch": "", "source": "",
        "payload": "", "message": f"seed {ctx.bench_id}",
    }
    serve = flow.served.serve[0]
    server = ctx.servers.start(serve.render(values), root, serve.environment(values))
    failure: str | None = None if wait_for_port(port, server.alive) else "the flow's serve command did not listen"
    payload_text, expected_head = "# task notes\n", None
    if failure is None:
        failure, payload_text, expected_head = _served_phases(ctx, rec, flow, values, run_index, payload_text)
    payload_ok = head_ok = False
    if failure is None:
        payload_ok, head_ok = _served_oracle(ctx, rec, flow, values, root / "verifier", payload_text, expected_head)
    stopped = server.stop()
    total = rec.total(
        OAK_LOCAL_TOTAL, oracle_payload_on_remote_branch=payload_ok and head_ok, oracle_payload_matches=payload_ok,
        oracle_branch_head_matches=head_ok, server_process_stopped=stopped, flow_notes=flow.notes,
        acquisition_models={phase: "as the flow says" for phase in flow.served.phases}, network_bytes=None,
        network_bytes_reason="the owned loopback server is not observed by a byte proxy")
    reason = failure or (None if payload_ok and head_ok else "oracle: payload or head differs on the server")
    if reason or not stopped:
        fail(total, reason or "the flow's serve command did not stop")
    shutil.rmtree(root, ignore_errors=True)
    return rec.emit_total(total)


def _served_phases(ctx: LaneContext, rec: Recorder, flow: Flow, values: dict[str, Any], run_index: int,
                   payload_text: str) -> tuple[str | None, str, str | None]:
    """The seed, then each phase in turn until one fails: (the failure, the payload the phases wrote, the head
    the last phase left)."""
    root = Path(values["root"])
    failure = _seed(rec, flow, values, root / "seed", payload_text)
    expected_head: str | None = None
    for phase, commands in flow.served.phases.items():
        if failure is not None:
            break
        phased = {**values, "phase": phase, "workspace": str(root / phase),
                  "payload": f"{phase} task run={run_index} bench={ctx.bench_id}",
                  "message": f"bench served task {ctx.bench_id} r{run_index} {phase}"}
        failure = _served_phase(rec, flow, values, phased, commands)
        if failure is None:
            payload_text += phased["payload"] + "\n"
            expected_head = rec.probe(f"{phase}.head", flow.probes["head"], phased)
    return failure, payload_text, expected_head


def _fetched(ctx: LaneContext, rec: Recorder, flow: Flow, values: dict[str, Any]) -> bool:
    """The oracle's copy of the served branch: the harness's git for a git remote, else the flow's verify."""
    if flow.served.url is not None:
        url = flow.served.url.format_map(values)
        argv = [ctx.git, "clone", "-q", "--branch", str(values["branch"]), url, str(values["verifier"])]
        return rec.harness("verify.clone", argv, Path(values["root"])).ok
    return all(rec.flow_harness(f"verify.{c.name or i}", c, values).ok for i, c in enumerate(flow.served.verify))
