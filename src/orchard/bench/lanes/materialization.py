"""Scenario `legacy_selected_clone_materialization_v1` (oak subjects only).

One fixed fixture is served by one loopback `oak serve` (run by the first oak
subject's binary, the same for every subject): a main history of 192 files of
16 KiB (8 executable, one empty file) imported from git, plus a selected
branch with one more file. Each oak subject clones the selected branch
through the byte-counting proxy, then runs its first status and a first
no-op commit. The oracle: the clone's head is the fixture's head and its
files (bytes and modes) equal the fixture's. Without an oak binary every
subject gets a skip row. Timing from this scenario is correctness evidence:
claims need interleaved A/B campaigns with the verdict.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchard.bench.flows import Probe
from orchard.bench.lanes.markdown import oracle_cell, table
from orchard.bench.lanes.steps import LaneContext, Recorder, fail
from orchard.bench.lanes.transport import LOOPBACK, free_port, wait_for_port
from orchard.bench.subjects import Subject

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


def run_campaign(ctx: LaneContext, subjects: Sequence[Subject], runs: int, git: str) -> None:
    oaks = [subject for subject in subjects if subject.kind == "oak" and subject.bin is not None]
    for subject in subjects:
        if subject not in oaks:
            reason = subject.absent_reason if subject.kind == "oak" else "this scenario measures oak subjects only"
            Recorder(ctx, subject, SCENARIO, 0).skip(reason or "no oak binary")
    if not oaks:
        return
    server_bin = str(oaks[0].bin)
    root = ctx.root / "materialization"
    git_seed, oak_seed, server_dir = root / "git-seed", root / "oak-seed", root / "server"
    for folder in (git_seed, server_dir):
        folder.mkdir(parents=True)
    setup = Recorder(ctx, oaks[0], SCENARIO, 0, fixture_id=FIXTURE_ID)
    write_fixture(git_seed)
    port = free_port()
    direct = f"http://{LOOPBACK}:{port}"
    failure = None
    for argv, cwd in (
        ([git, "init", "-q", "-b", "main"], git_seed),
        ([git, "add", "."], git_seed),
        ([git, "commit", "-q", "-m", "fixture main"], git_seed),
    ):
        if not setup.harness("setup.git_fixture", argv, cwd).ok:
            failure = "git fixture could not be built"
    server = ctx.servers.start(
        [server_bin, "serve", "--dir", str(server_dir), "--host", LOOPBACK, "--port", str(port)], root
    )
    if failure is None and not wait_for_port(port, server.alive):
        failure = "oak serve did not listen on its port"
    steps: list[tuple[list[str], Path, str | None]] = [
        ([server_bin, "clone", str(git_seed), str(oak_seed)], root, None),
        ([server_bin, "switch", "-c", BRANCH], oak_seed, "selected.txt"),
        ([server_bin, "commit"], oak_seed, None),
        ([server_bin, "push", "--repo", REPO, "--remote", direct], oak_seed, None),
    ]
    for argv, cwd, write in steps:
        if failure is not None:
            break
        if not setup.harness("setup.oak_fixture", argv, cwd).ok:
            failure = f"`oak {argv[1]}` failed while building the fixture"
        elif write:
            (oak_seed / write).write_text("selected branch\n")
    expected_head = (
        None if failure else setup.probe("setup.head", Probe((server_bin, "hash")), {"workspace": str(oak_seed)})
    )
    expected_tree = None if failure else worktree_snapshot(oak_seed)
    if failure or expected_head is None:
        setup.emit_total(fail(setup.total(TOTAL), f"fixture: {failure or 'fixture head unreadable'}"))
        server.stop()
        return
    proxy = ctx.servers.proxy(port)
    measured = f"http://{LOOPBACK}:{proxy.port}"
    fields = {"remote_transport": "loopback_http", "remote_server": LOOPBACK, "serve_binary": server_bin}
    for run_index in range(runs):
        for subject in oaks:
            rec = Recorder(ctx, subject, SCENARIO, run_index, fields=fields, fixture_id=FIXTURE_ID, proxy=proxy,
                           stand_ins={measured: "REMOTE"})
            dest = root / f"clone-{subject.name}-r{run_index}"
            clone = rec.execute(
                "legacy_selected.acquire",
                [
                    str(subject.bin),
                    "clone",
                    "--json",
                    "--allow-legacy-scope",
                    "--remote",
                    measured,
                    "--branch",
                    BRANCH,
                    REPO,
                    str(dest),
                ],
                root,
            )
            status = rec.execute("legacy_selected.first_status", [str(subject.bin), "status", "--json"], dest)
            commit = rec.execute("legacy_selected.first_noop_commit", [str(subject.bin), "commit"], dest)
            head = rec.probe("verify.head", Probe((str(subject.bin), "hash")), {"workspace": str(dest)})
            tree_ok = dest.is_dir() and worktree_snapshot(dest) == expected_tree
            total = rec.total(
                TOTAL,
                clone_elapsed_ms=clone["elapsed_ms"],
                first_status_elapsed_ms=status["elapsed_ms"],
                first_noop_commit_elapsed_ms=commit["elapsed_ms"],
                network_client_to_server_bytes=clone.get("network_client_to_server_bytes"),
                network_server_to_client_bytes=clone.get("network_server_to_client_bytes"),
                oracle_head_matches=head == expected_head,
                oracle_worktree_bytes_and_modes_match=tree_ok,
                oracle_passed=head == expected_head and tree_ok,
                os_cache_state="warm_or_unknown",
                materialization_timing_claimable=False,
            )
            if not total["oracle_passed"]:
                fail(total, "oracle: clone head or files differ from the fixture")
            rec.emit_total(total)
    server.stop()


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
