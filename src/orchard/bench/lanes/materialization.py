"""Scenario `legacy_selected_clone_materialization_v1`: a selected branch cloned from an owned server.

One fixed fixture (a main history of 192 files of 16 KiB, 8 executable,
one empty file, built by the harness's git) is imported by the flow's
`[materialization] import` commands into the server the flow's `[served]
serve` command runs on loopback, with a selected branch holding one more
file. Per flow kind, the first subject's binary serves and builds the
fixture, the same for every subject of that kind. Each subject then runs
the flow's `acquire` (clone the selected branch through the byte-counting
proxy), `status` and `commit` (a first no-op commit). The oracle: the
clone's head (read by the harness's git for a git flow, else by the flow's
`head` probe) is the fixture's head and its files
(bytes and modes) equal the fixture's. A subject whose flow lacks these keys
gets a skip row naming them. Timing from this scenario is correctness
evidence: claims need interleaved A/B campaigns with the verdict.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from orchard.bench.lanes.steps import LaneContext, Recorder, fail
from orchard.bench.lanes.summary import oracle_cell, table
from orchard.bench.lanes.transport import LOOPBACK, free_port, wait_for_port
from orchard.bench.measuring import rows
from orchard.bench.suites.flows import MATERIALIZATION_KEYS, Flow
from orchard.bench.suites.subjects import Subject

SCENARIO = "legacy_selected_clone_materialization_v1"
TOTAL = "legacy_selected_clone_materialization.total"
FIXTURE_ID = "legacy-selected-materialization-192x16k-v1"
FILES, FILE_BYTES, EXECUTABLES, GROUPS = 192, 16 * 1024, 8, 12
BRANCH = "selected-materialization"
REPO = "qa/materialization-bench"
META_DIRS = {".oak", ".git"}


def worktree_snapshot(root: Path) -> list[tuple[str, int, str]]:
    """(path, mode, sha256) of every file outside the VCS's own directory."""
    found = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if relative.parts[0] in META_DIRS or path.is_dir():
            continue
        info = path.lstat()
        digest = os.readlink(path) if stat.S_ISLNK(info.st_mode) else hashlib.sha256(path.read_bytes()).hexdigest()
        found.append((relative.as_posix(), stat.S_IMODE(info.st_mode), digest))
    return found


def write_fixture(folder: Path) -> None:
    for index in range(FILES):
        group = folder / f"group-{index % GROUPS:02d}"
        group.mkdir(parents=True, exist_ok=True)
        seed = hashlib.sha256(f"orchard-materialization-{index}".encode()).digest()
        path = group / f"file-{index:03d}.bin"
        path.write_bytes((seed * (FILE_BYTES // len(seed) + 1))[:FILE_BYTES])
        if index < EXECUTABLES:
            path.chmod(0o755)
    (folder / "empty.txt").write_bytes(b"")


NEEDS = (*(f"[materialization] {key}" for key in MATERIALIZATION_KEYS), "[served] serve", "[probes] head")


def run_campaign(ctx: LaneContext, subjects: Sequence[Subject], flows: Mapping[str, Flow], runs: int) -> None:
    """Per flow kind that can enter: one server and fixture (the first subject's), every subject of the kind."""
    by_kind: dict[str, list[Subject]] = {}
    for subject in subjects:
        reason = subject.absent_reason if subject.bin is None else flows[subject.kind].skip_reason(SCENARIO, NEEDS)
        if reason:
            Recorder(ctx, subject, SCENARIO, 0).skip(reason)
        else:
            by_kind.setdefault(subject.kind, []).append(subject)
    for kind, members in by_kind.items():
        _campaign(ctx, members, flows[kind], runs)


def _campaign(ctx: LaneContext, members: Sequence[Subject], flow: Flow, runs: int) -> None:
    server_bin = str(members[0].bin)
    root = ctx.root / f"materialization-{flow.kind}"
    git_seed, seed, server_dir = root / "git-seed", root / "seed", root / "server"
    for folder in (git_seed, server_dir):
        folder.mkdir(parents=True)
    setup = Recorder(ctx, members[0], SCENARIO, 0, fixture_id=FIXTURE_ID)
    write_fixture(git_seed)
    port = free_port()
    scheme = flow.served_scheme
    values: dict[str, Any] = {
        "bin": server_bin, "root": str(root), "base": str(root), "workspace": str(seed), "verifier": str(root),
        "server_dir": str(server_dir), "host": LOOPBACK, "port": port, "remote": f"{scheme}://{LOOPBACK}:{port}",
        "repo": REPO, "branch": BRANCH, "source": str(git_seed), "message": "selected branch", "payload": "",
        "run": 0, "bench_id": ctx.bench_id, "subject": members[0].name, "phase": "setup",
    }
    failure = _git_fixture(ctx, setup, git_seed)
    serve = flow.served.serve[0]
    server = ctx.servers.start(serve.render(values), root, serve.environment(values))
    failure = failure or _imported(setup, flow, values, lambda: wait_for_port(port, server.alive))
    expected_head = None if failure else _head(ctx, setup, flow, values)
    expected_tree = None if failure else worktree_snapshot(seed)
    if failure or expected_head is None or expected_tree is None:
        setup.emit_total(fail(setup.total(TOTAL), f"fixture: {failure or 'fixture head unreadable'}"))
        server.stop()
        return
    proxy = ctx.servers.proxy(port)
    measured = f"{scheme}://{LOOPBACK}:{proxy.port}"
    fields = {"remote_transport": f"loopback_{scheme}", "remote_server": LOOPBACK, "serve_binary": server_bin}
    for run_index in range(runs):
        for subject in members:
            rec = Recorder(ctx, subject, SCENARIO, run_index, fields=fields, fixture_id=FIXTURE_ID, proxy=proxy,
                           stand_ins={measured: "REMOTE"})
            mine = {**values, "bin": str(subject.bin), "remote": measured,
                    "workspace": str(root / f"clone-{subject.name}-r{run_index}"), "subject": subject.name,
                    "run": run_index, "phase": "legacy_selected", "message": f"first no-op commit r{run_index}"}
            _clone(ctx, rec, flow, mine, expected_head, expected_tree)
    server.stop()


def _clone(ctx: LaneContext, rec: Recorder, flow: Flow, mine: dict[str, Any], expected_head: str,
           expected_tree: list[tuple[str, int, str]]) -> None:
    """One subject's timed clone, first status and first no-op commit, and the oracle on what it materialized."""
    dest = Path(mine["workspace"])
    timed = {}
    for key in ("acquire", "status", "commit"):
        for command in flow.materialization[key]:
            timed[key] = rec.command(f"legacy_selected.{key}", command, mine)
    head = _head(ctx, rec, flow, mine)
    tree_ok = dest.is_dir() and worktree_snapshot(dest) == expected_tree
    total = rec.total(
        TOTAL,
        clone_elapsed_ms=timed["acquire"]["elapsed_ms"],
        first_status_elapsed_ms=timed["status"]["elapsed_ms"],
        first_noop_commit_elapsed_ms=timed["commit"]["elapsed_ms"],
        network_client_to_server_bytes=timed["acquire"].get("network_client_to_server_bytes"),
        network_server_to_client_bytes=timed["acquire"].get("network_server_to_client_bytes"),
        oracle_head_matches=head == expected_head,
        oracle_worktree_bytes_and_modes_match=tree_ok,
        oracle_passed=head == expected_head and tree_ok,
        os_cache_state="warm_or_unknown",
        materialization_timing_claimable=False,
    )
    if not rows.is_failure(total) and not total["oracle_passed"]:
        fail(total, "oracle: clone head or files differ from the fixture")
    rec.emit_total(total)


def _git_fixture(ctx: LaneContext, setup: Recorder, git_seed: Path) -> str | None:
    """The fixture committed as a git repository to import from; or why not."""
    failure = None
    for argv in ([ctx.git, "init", "-q", "-b", "main"], [ctx.git, "add", "."],
                 [ctx.git, "commit", "-q", "-m", "fixture main"]):
        if not setup.harness("setup.git_fixture", argv, git_seed).ok:
            failure = "git fixture could not be built"
    return failure


def _imported(setup: Recorder, flow: Flow, values: dict[str, Any], listening: Callable[[], bool]) -> str | None:
    """The fixture imported into the served repository by the flow's commands, once its server listens; or why
    not."""
    if not listening():
        return "the flow's serve command did not listen on its port"
    for index, command in enumerate(flow.materialization["import"]):
        if not setup.flow_harness(f"setup.import.{index}", command, values).ok:
            return f"[materialization] import command {index} failed while building the fixture"
    return None


def _head(ctx: LaneContext, rec: Recorder, flow: Flow, values: Mapping[str, Any]) -> str | None:
    """A checkout's head: read by the harness's own git for a git flow, else by the flow's `head` probe."""
    operation = "verify.head" if values["phase"] != "setup" else "setup.head"
    if flow.harness_verifies:
        capture = rec.harness(operation, [ctx.git, "rev-parse", "HEAD"], Path(values["workspace"]))
        return capture.stdout_text.strip() if capture.ok else None
    return rec.probe(operation, flow.probes["head"], values)


def summary_section(totals: Sequence[Mapping[str, Any]]) -> list[str]:
    if not totals:
        return []
    lines = [
        "",
        "## legacy_selected_clone_materialization_v1",
        "",
        "One fixed loopback server and fixture for every subject; fresh destinations do",
        "not imply a cold page cache. Correctness evidence; timing claims need the verdict.",
        "",
    ]
    return lines + table(
        ("Subject", "Run", "Clone ms", "First status ms", "First no-op commit ms", "Bytes down", "Oracle"),
        (
            (
                f"`{r['subject']}`",
                r["run"],
                r.get("clone_elapsed_ms"),
                r.get("first_status_elapsed_ms"),
                r.get("first_noop_commit_elapsed_ms"),
                r.get("network_server_to_client_bytes"),
                oracle_cell(r.get("oracle_passed")),
            )
            for r in totals
        ),
    )
