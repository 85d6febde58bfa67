"""The core lane on real git at 1,000 files: the three gates, broken subjects, the cache, twig, opportunities."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from orchard.bench.lanes.core import parse_files
from orchard.bench.lanes.generated_repo import RepoSpec, ensure, typical_edit
from orchard.bench.results import opportunities
from orchard.bench.sandbox.environment import isolated_env
from orchard.bench.suites.flow_reader import shipped_flow_files
from orchard.errors import UsageError
from tests.bench import twig
from tests.bench.lanes_support import LaneEnv, invoke, latest_rows, totals

OPS = ["core.status", "core.diff", "core.log", "core.show"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One fixture cache for the module: the 1,000-file repository is built once."""
    return tmp_path_factory.mktemp("core-cache")


def _core(lane_env: LaneEnv, cache: Path, subjects: str, *extra: str) -> object:
    return invoke(
        "bench", "core", "--subjects", subjects, "--files", "1000", "--no-binaries", "--runs", "2",
        "--cache", str(cache), "--results", str(lane_env.results), *extra,
    )


def test_git_at_1000_files_passes_every_gate_and_the_fixture_is_cached(lane_env: LaneEnv, cache: Path) -> None:
    result = _core(lane_env, cache, "git")
    assert result.exit_code == 0, result.output
    every = latest_rows(lane_env.results, "core", warmup=True)
    runs = totals(every, "core.total")
    assert [(r["run"], bool(r.get("warmup"))) for r in runs] == [(-1, True), (0, False), (1, False)]
    for total in runs:
        assert total["returncode"] == 0, total.get("failure_reason")
        assert total["information_recall"] == 1.0 and total["information_recall_missing"] == []
        assert total["pipe_compatible_unified"] is True and total["gates_failed"] == []
        assert total["summarized_operations"] == OPS and total["tool_call_count"] == 4
        assert total["files"] == 1000 and total["fixture_label"] == "files-1000"
        assert total["output_bytes"] > 0 and total["estimated_total_tokens"] > 0
        assert all(total[f"{op}_ms"] > 0 for op in ("status", "diff", "log", "show"))
        assert len(total["edit_paths"]) == 7 and len(total["edit_hunk_headers"]) == 6
    assert runs[0]["determinism"] is None  # the warm-up is the reference
    assert runs[1]["determinism"] is True and runs[2]["determinism"] is True
    status = next(r for r in every if r["operation"] == "core.status" and not r.get("warmup"))
    assert status["command"].endswith("status --porcelain=v1") and status["phase"] == "files-1000"
    assert "| files-1000 | `git` | 2 |" in result.output and "| pass |" in result.output
    assert "[fixture] files-1000: built" in result.output or "files-1000: cached" in result.output
    again = _core(lane_env, cache, "git")
    assert again.exit_code == 0
    assert "[fixture] files-1000: cached" in again.output
    assert lane_env.leftovers() == []


def test_a_broken_subject_fails_each_gate(lane_env: LaneEnv, cache: Path) -> None:
    drops = lane_env.wrapper(
        "drops-git", 'if [ "$1" = status ]; then git "$@" | grep -v added_by_agent; exit 0; fi\nexec git "$@"\n'
    )
    mangles = lane_env.wrapper(
        "mangles-git", 'if [ "$1" = diff ]; then git "$@" | sed "s/^-file/-FILE/"; exit 0; fi\nexec git "$@"\n'
    )
    stamps = lane_env.wrapper("stamps-git", 'if [ "$1" = log ]; then date +%s%N; fi\nexec git "$@"\n')
    result = _core(lane_env, cache, f"drops:git={drops},mangles:git={mangles},stamps:git={stamps}")
    assert result.exit_code == 1
    measured = totals(latest_rows(lane_env.results, "core"), "core.total")
    by_subject = {(r["subject"], r["run"]): r for r in measured}
    for run in (0, 1):
        drop = by_subject[("drops", run)]
        assert drop["gates_failed"] == ["information_recall"] and drop["returncode"] == 1
        assert drop["information_recall_missing"] == ["status: src/added_by_agent.txt"]
        assert "gate information_recall" in drop["failure_reason"]
        mangle = by_subject[("mangles", run)]
        assert (
            mangle["gates_failed"] == ["pipe_compatible_unified"] and "git apply --check" in mangle["pipe_check_error"]
        )
        stamp = by_subject[("stamps", run)]
        assert stamp["gates_failed"] == ["determinism"] and stamp["determinism_changed"] == ["log"]
    assert result.output.count("| FAIL |") == 3


@pytest.mark.slow
def test_twig_enters_the_core_lane_by_its_flow_and_opportunities_rank_core_beside_task_loop(
    lane_env: LaneEnv, cache: Path, tmp_path: Path
) -> None:
    binary, flow = twig.install(tmp_path)
    result = _core(lane_env, cache, f"git,twig={binary}", "--flow", str(flow))
    assert result.exit_code == 0, result.output
    measured = totals(latest_rows(lane_env.results, "core"), "core.total")
    assert {r["subject"] for r in measured} == {"git", "twig"}
    assert all(r["returncode"] == 0 and r["gates_failed"] == [] for r in measured)
    twig_status = next(
        r for r in latest_rows(lane_env.results, "core") if r["subject"] == "twig" and r["operation"] == "core.status"
    )
    assert twig_status["command"].endswith("twig look")
    loop = invoke(
        "bench",
        "task-loop",
        "--subjects",
        f"git,twig={binary}",
        "--flow",
        str(flow),
        "--runs",
        "1",
        "--results",
        str(lane_env.results),
    )
    assert loop.exit_code == 0, loop.output
    ranking = opportunities.rank(lane_env.results)
    lanes = {item.lane for item in ranking.items}
    assert {"core", "task-loop"} <= lanes
    # git's commands are longer to type than twig's: a token gap in the core lane, located by step
    core_tokens = [
        i
        for i in ranking.items
        if i.lane == "core" and i.metric == "estimated_total_tokens" and i.level == "total"
    ]
    assert core_tokens and core_tokens[0].operation == "core.total[files-1000]"
    assert {part.part.split(".")[0] for part in core_tokens[0].where} == {"files-1000"}
    listed = invoke("opportunities", "--results", str(lane_env.results), "--json")
    assert any(item["lane"] == "core" for item in json.loads(listed.output)["items"])


def test_a_flow_without_core_commands_is_a_skip_row_naming_them(lane_env: LaneEnv, cache: Path, tmp_path: Path) -> None:
    text = shipped_flow_files()["git"].read_text().replace('kind = "git"', 'kind = "plain"', 1)
    start = text.index("[core]")
    flow = tmp_path / "plain.toml"
    flow.write_text(text[:start] + text[text.index("# agent_task_baseline_v1") :])
    result = _core(lane_env, cache, "plain:plain=git", "--flow", str(flow))
    assert result.exit_code == 0, result.output
    (skip,) = latest_rows(lane_env.results, "core", warmup=True)
    assert skip["returncode"] == 77
    assert "[core] acquire, [core] status, [core] diff, [core] log, [core] show" in skip["skip_reason"]


@pytest.mark.parametrize("text", ["0", "1000,x", "7", ""])
def test_bad_file_counts_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError, match="--files"):
        parse_files(text)


def test_a_damaged_cache_entry_is_rebuilt(tmp_path: Path) -> None:
    env = isolated_env()
    spec = RepoSpec(40, history=3)
    first = ensure(spec, tmp_path, "git", env)
    assert first.built
    # packed in the foreground: no loose objects left for a detached auto gc to repack under a clone
    counts = subprocess.run(
        ["git", "count-objects", "-v"], cwd=first.path, env=env, capture_output=True, text=True, check=True
    ).stdout
    assert "count: 0\n" in counts and "packs: 1\n" in counts
    assert ensure(spec, tmp_path, "git", env) == first.__class__(spec, first.path, first.head, built=False)
    (first.path / ".git" / "HEAD").write_text("ref: refs/heads/nowhere\n")
    rebuilt = ensure(spec, tmp_path, "git", env)
    assert rebuilt.built and rebuilt.head == first.head  # same spec, same commit id


def test_the_typical_edit_changes_add_rename_delete(tmp_path: Path) -> None:
    spec = RepoSpec(70, history=2)
    fixture = ensure(spec, tmp_path / "cache", "git", isolated_env())
    work = tmp_path / "work"
    shutil.copytree(fixture.path, work)
    edit = typical_edit(spec, work)
    assert len(edit.modified) == 3 and (work / edit.added).is_file()
    assert not (work / edit.renamed[0]).exists() and (work / edit.renamed[1]).is_file()
    assert not (work / edit.deleted).exists()
    assert edit.hunk_headers[:2] == ("@@ -2,7 +2,7 @@", "@@ -25,6 +25,6 @@") and "@@ -0,0 +1,12 @@" in edit.hunk_headers
