"""Scenario `interrupted_publication_after_request_v1`.

A loopback fixture receives one complete publication request and drops the
connection before answering. The lane then reports two things separately:
what the CLI claimed (exit code, stderr, a classification of that claim) and
what the fixture saw (requests, bytes, whether the request was complete).
It passes only if the fixture saw exactly one complete request (no blind
replay), the CLI did not claim success, and the local head, the edited file
and the "not yet published" state all survived.

The fixture is chosen by the flow's `publish_protocol`. For `git` it is
`ByteProxy` in front of `git daemon` with `DropAfterPushRequest`: fetches
pass through; a push's service line reaches the daemon (which answers with
its refs), but the command list and pack are withheld from it and parsed by
`pushwire`; once the pack's SHA-1 trailer has arrived and matches, the
connection is dropped. The daemon never sees the update. Any CLI that
pushes over git's wire declares `git`. For `oak-http` the fixture is an HTTP
server that reads a push POST to its Content-Length and drops the
connection, as the seed harness does.

Whether the publication landed is asked by the flow's own `[interrupted]
landed` probe, before and after the attempt (for git: the harness's git
reads the fixture's served repository, `{remote_dir}`), so the fixture, not
the CLI, says the push was not applied. A flow without the probe makes no
claim (`fixture_remote_ref_unchanged: null`).
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from orchard.bench.lanes.fault_fixture import DropAfterPushRequest, DropPushHandler, FixtureReport
from orchard.bench.lanes.remotes import seed_bare
from orchard.bench.lanes.steps import LaneContext, Recorder, Row, fail
from orchard.bench.lanes.transport import LOOPBACK
from orchard.bench.measuring import rows
from orchard.bench.suites.flows import Flow, PublishProtocol
from orchard.bench.suites.subjects import Subject
from orchard.errors import FixtureError

SCENARIO = "interrupted_publication_after_request_v1"
TOTAL = "interrupted_publication.total"
FIXTURE_ID = "interrupted-publication-after-request-v1"
TRANSPORT = "loopback_fault_fixture"
UNKNOWN_MARKERS = ("unconfirmed", "unknown", "may have", "might have")
ANY_FAILURE = tuple(range(1, 256))


def classify_claim(row: Row, stdout: str, stderr: str) -> dict[str, Any]:
    """Only what the CLI itself reported, never what the fixture knows."""
    if row.get("timed_out"):
        outcome, observation = "unreported", "process_timeout"
    elif row.get("process_returncode") == 0:
        outcome, observation = "published", "exit_0_success_claim"
    elif any(marker in f"{stdout}\n{stderr}".lower() for marker in UNKNOWN_MARKERS):
        outcome, observation = "unknown", "error_says_outcome_unknown"
    else:
        outcome, observation = "failed", "error_without_outcome_uncertainty"
    return {
        "publication_outcome": outcome,
        "cli_observation": observation,
        "cli_returncode": row.get("process_returncode"),
        "cli_stderr_tail": stderr.strip()[-1000:],
    }


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


NEEDS = ("publish_protocol", "[interrupted] acquire", "[probes] head", "[probes] unpublished")


def run(ctx: LaneContext, subject: Subject, flow: Flow, run_index: int) -> Row:
    """One interrupted publication for one subject; returns its total row.

    The fixture is chosen by the flow's `publish_protocol`, not by the
    subject's kind: any CLI that publishes over git's smart protocol is cut by
    the git fixture. The workspace comes from the flow's `[interrupted]
    acquire` commands, the attempt is `[interrupted] publish` (else the last
    command of the publish step).
    """
    protocol = flow.publish_protocol
    fields = {
        "remote_transport": TRANSPORT, "remote_server": LOOPBACK, "benchmark_track": "failure-evidence",
        "publish_protocol": None if protocol is None else str(protocol),
    }
    rec = Recorder(ctx, subject, SCENARIO, run_index, fields=fields, fixture_id=FIXTURE_ID)
    root = ctx.root / f"interrupted-{subject.name}-r{run_index}"
    root.mkdir(parents=True)
    values: dict[str, Any] = {
        "bin": str(subject.bin), "root": str(root), "workspace": str(root / "work"), "base": str(root),
        "verifier": str(root / "verifier"), "run": run_index, "bench_id": ctx.bench_id,
        "subject": subject.name, "phase": "setup",
        "payload": f"interrupted publication run={run_index} bench={ctx.bench_id}",
        "message": f"interrupted publication {ctx.bench_id} r{run_index}", "repo": "oak/repo",
        "git": ctx.git, "remote_dir": "",
    }
    try:
        with _fault_fixture(ctx, f"interrupted-{subject.name}-r{run_index}", protocol, values) as report:
            seen = _attempt(rec, flow, values, root / "work")
    except FixtureError as error:
        return rec.emit_total(fail(rec.total(TOTAL), f"fixture: {error}"))
    evidence = _evidence(flow, seen, report)
    total = rec.total(TOTAL, **evidence)
    problems = [
        name
        for name, ok in (
            (
                "fixture did not receive one complete request",
                evidence["fixture_received_complete_request_before_disconnect"],
            ),
            ("blind replay: more than one publication request", evidence["mutation_requests_observed"] <= 1),
            ("local head changed", evidence["local_head_preserved"]),
            ("local work lost or marked published", evidence["local_work_preserved"]),
            ("server ref changed behind the fixture", evidence["fixture_remote_ref_unchanged"] is not False),
            ("publication attempt did not end with a failure", not rows.is_failure(seen.attempt)),
        )
        if not ok
    ]
    if problems:
        fail(total, "; ".join(problems))
    return rec.emit_total(total)


@contextlib.contextmanager
def _fault_fixture(ctx: LaneContext, name: str, protocol: PublishProtocol | None,
                   values: dict[str, Any]) -> Iterator[FixtureReport]:
    """The fault fixture for the flow's publish protocol, its remote set in `values`; stopped afterwards."""
    if protocol is PublishProtocol.GIT:
        fault = DropAfterPushRequest()
        bare = seed_bare(ctx.git, ctx.servers.served / f"{name}.git", ctx.env)
        proxy = ctx.servers.proxy(ctx.servers.daemon().port, fault)
        values.update(remote=f"git://{LOOPBACK}:{proxy.port}/{name}.git", branch="main", remote_dir=str(bare))
        yield fault.report
        return
    http_server = ThreadingHTTPServer((LOOPBACK, 0), DropPushHandler)
    http_server.report = FixtureReport()  # type: ignore[attr-defined]
    thread = threading.Thread(target=http_server.serve_forever, name="interrupted-http", daemon=True)
    try:
        thread.start()
        values.update(remote=f"http://{LOOPBACK}:{http_server.server_address[1]}", branch="")
        yield http_server.report  # type: ignore[attr-defined]
    finally:
        http_server.shutdown()
        http_server.server_close()
        thread.join(timeout=5)


@dataclass(frozen=True)
class _Seen:
    """What one run observed around its publication attempt."""

    attempt: Row
    claim: dict[str, Any]
    head_before: str | None
    head_after: str | None
    payload_before: str | None
    payload_after: str | None
    unpublished: bool
    landed_before: str | None  # the flow's landed probe, asking the remote (None: no probe)
    landed_after: str | None


def _attempt(rec: Recorder, flow: Flow, values: dict[str, Any], workspace: Path) -> _Seen:
    """Acquire, edit and snapshot; probe; attempt the publication the fixture cuts; inspect; probe again."""
    for index, command in enumerate(flow.interrupted["acquire"]):
        Path(values[command.cwd]).mkdir(parents=True, exist_ok=True)
        if not rec.flow_harness(f"setup.acquire.{index}", command, values).ok:
            raise FixtureError(f"[interrupted] acquire against the {flow.publish_protocol} fault fixture failed")
    for step in ("edit", "snapshot"):
        if not rec.flow_step("setup", step, flow.step(step), values):
            raise FixtureError(f"setup {step} failed")
    landed_before = None if flow.landed is None else rec.probe("probe.landed_before", flow.landed, values)
    head_before = rec.probe("probe.head_before", flow.probes["head"], values)
    payload_before = _sha256(workspace / flow.payload_file)
    publish = (flow.interrupted.get("publish") or flow.step("publish"))[-1]
    attempt = rec.command("publication.attempt", publish, values, expected=ANY_FAILURE)
    capture = rec.last_capture
    claim = classify_claim(attempt, capture.stdout_text if capture else "", capture.stderr_text if capture else "")
    rec.flow_step("reconcile", "inspect", flow.step("inspect"), values)
    return _Seen(
        attempt=attempt, claim=claim, head_before=head_before,
        head_after=rec.probe("probe.head_after", flow.probes["head"], values),
        unpublished=rec.probe("probe.unpublished", flow.probes["unpublished"], values) is not None,
        payload_before=payload_before, payload_after=_sha256(workspace / flow.payload_file),
        landed_before=landed_before,
        landed_after=None if flow.landed is None else rec.probe("probe.landed_after", flow.landed, values),
    )


def _evidence(flow: Flow, seen: _Seen, report: FixtureReport) -> dict[str, Any]:
    """The total row's evidence: what the CLI claimed, what the fixture saw, what was kept locally."""
    payload_preserved = seen.payload_before is not None and seen.payload_before == seen.payload_after
    landed = seen.landed_before is not None and seen.landed_after is not None
    return {
        **seen.claim,
        **report.fields(),
        "fixture_outcome_knowledge": "withheld_from_server_not_applied"
        if flow.publish_protocol is PublishProtocol.GIT
        else "unknown_after_complete_request_disconnect",
        # Did the publication land? The flow's own probe asks the remote, before and after; no probe, no claim.
        "fixture_remote_ref_unchanged": seen.landed_after == seen.landed_before if landed else None,
        "fixture_landed_probe": None if flow.landed is None else " ".join(flow.landed.argv),
        "fixture_landed_before": seen.landed_before,
        "fixture_landed_after": seen.landed_after,
        "local_head_before": seen.head_before,
        "local_head_after": seen.head_after,
        "local_head_preserved": seen.head_before is not None and seen.head_before == seen.head_after,
        "worktree_payload_preserved": payload_preserved,
        "unpublished_state_preserved": seen.unpublished,
        "local_work_preserved": payload_preserved and seen.unpublished,
        "human_action_count": 0,
    }
