"""Tokens do not depend on where a binary lives or what it is called.

The counted command line renders the binary and every per-run path with a
stable stand-in; rows keep both the counted text and the raw command.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from orchard.bench.measuring import tokens
from orchard.jsonlines import read_jsonl
from tests.bench.lanes_support import LaneEnv, edited_flow, invoke, latest_rows, totals
from tests.helpers import make_binary, orchard

TOKENS_SUITE = """
[suite]
name = "tokens"
runs = 6
min_runs = 6
calibration_runs = 6

[[fixture]]
name = "data"
command = ["sh", "-c", "echo hello > {dir}/input.txt"]

[[scenario]]
name = "argv"
command = ["{bin}", "{fixture.data}/input.txt", "{workdir}"]

[[scenario]]
name = "shell"
command = "{bin} {fixture.data}/input.txt > /dev/null; echo done"

[[metric]]
name = "estimated_total_tokens"

[[metric]]
name = "tool_call_count"
"""


@pytest.mark.slow
def test_identical_binaries_under_other_names_and_directories_count_the_same_tokens(tmp_path: Path) -> None:
    short = make_binary(tmp_path, "a.sh", iterations=10)
    deep = tmp_path / "a" / "much" / "deeper" / "install" / "prefix" / "bin"
    deep.mkdir(parents=True)
    long = deep / "a-much-longer-name-for-the-same-tool.sh"
    shutil.copy2(short, long)
    (tmp_path / "suite.toml").write_text(TOKENS_SUITE)
    result = orchard(
        "verdict",
        "--suite",
        "suite.toml",
        "--baseline",
        short,
        "--candidate",
        long,
        "--json",
        "--results",
        "results",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["verdict"] == "NO-CHANGE", report["reasons"]
    for metric in report["metrics"]:
        assert (metric["method"], metric["verdict"], metric["effect"]) == ("exact", "no-change", 0.0)
    measured = [r for r in read_jsonl(tmp_path / report["rows"]) if r.get("step_kind") == "measured"]
    by_role: dict[str, set[tuple[str, int, str]]] = {"baseline": set(), "candidate": set()}
    for row in measured:
        by_role[row["role"]].add((row["scenario"], row["estimated_total_tokens"], row["counted_command"]))
    assert by_role["baseline"] == by_role["candidate"]
    argv_rows = [r for r in measured if r["scenario"] == "argv"]
    assert {r["counted_command"] for r in argv_rows} == {"BIN FIXTURE_data/input.txt WORKDIR"}
    # the raw command stays in the row, with the real path
    assert any(str(long) in r["command"] for r in argv_rows)
    assert any(str(short) in r["command"] for r in argv_rows)


def test_stand_ins_replace_whole_values_only() -> None:
    stand_ins = tokens.StandIns.of({"/opt/tools/git": "BIN", "/tmp/run-123": "ROOT", "git": "SUBJECT"})
    text = stand_ins.command(
        [
            "/opt/tools/git",
            "clone",
            "/tmp/run-123/remote.git",
            "/tmp/run-123/task_loop-git-r0/base",
            "--branch=bench/task-git-r0",
        ]
    )
    assert text == "BIN clone ROOT/remote.git ROOT/task_loop-SUBJECT-r0/base --branch=bench/task-SUBJECT-r0"
    # a path that needs quoting counts as the same stand-in
    quoted = tokens.StandIns.of({"/a b/tool": "BIN"})
    assert quoted.command("'/a b/tool' --version") == "BIN --version"
    assert quoted.command(["/a b/tool", "--version"]) == "BIN --version"


def test_core_lane_tokens_do_not_depend_on_where_the_fixture_cache_lives(lane_env: LaneEnv, tmp_path: Path) -> None:
    """A path outside the lane's root (the --cache directory) is a stand-in in the counted command too."""
    flow = edited_flow(
        tmp_path,
        'log = [{ argv = ["{bin}", "log", "-n", "10"] }]',
        'log = [{ argv = ["{bin}", "-C", "{fixture}", "log", "-n", "10"] }]',  # reads the upstream fixture
    )
    flow.write_text(flow.read_text().replace('kind = "git"', 'kind = "upstream"', 1))
    counted: list[dict[str, tuple[int, str]]] = []
    caches = (tmp_path / "c", tmp_path / "a" / "much" / "deeper" / "place" / "for" / "the" / "fixture-cache")
    for cache in caches:
        result = invoke(
            "bench", "core", "--subjects", "upstream:upstream=git", "--flow", str(flow), "--files", "20",
            "--no-binaries", "--runs", "1", "--cache", str(cache), "--results", str(lane_env.results),
        )
        assert result.exit_code == 0, result.output
        steps = [r for r in latest_rows(lane_env.results, "core") if r.get("step_kind") == "vcs"]
        assert any(str(cache) in r["command"] for r in steps)  # the raw command keeps the real path
        counted.append({r["operation"]: (r["estimated_total_tokens"], r["counted_command"]) for r in steps})
    assert counted[0] == counted[1]
    assert counted[0]["core.log"][1] == "BIN -C FIXTURE log -n 10"
    totals_ = [totals(latest_rows(lane_env.results, "core"), "core.total")[0]["estimated_total_tokens"]]
    assert totals_[0] == sum(tokens_ for tokens_, _ in counted[0].values())


def test_the_binary_stays_bin_where_another_placeholder_holds_the_same_path(lane_env: LaneEnv) -> None:
    """In interrupted publication `{git}` (the harness's git) is the subject's own path: still counted as BIN."""
    result = invoke(
        "bench", "task-loop", "--subjects", "git", "--runs", "1", "--scenarios",
        "interrupted_publication_after_request_v1", "--results", str(lane_env.results),
    )
    assert result.exit_code == 0, result.output
    (attempt,) = [r for r in latest_rows(lane_env.results, "task-loop") if r["operation"] == "publication.attempt"]
    assert attempt["counted_command"] == "BIN push -q -u origin main"
