"""The task-loop lane, run for real on git: local and daemon transports, skips, faults."""

from __future__ import annotations

import signal
import sqlite3

import psutil
import pytest

from orchard.bench.measuring.rows import COMPARABILITY_KEYS
from tests.bench.lanes_support import LaneEnv, cli_process, invoke, latest_rows, totals, wait_for, without_oak_on_path

TASK_LOOP_OPS = [
    f"{phase}.{step}"
    for phase in ("task", "followup")
    for step in ("acquire", "inspect", "edit", "snapshot.add", "snapshot.commit", "publish", "end")
]


def test_local_task_loop_rows_oracle_and_oak_skips(lane_env: LaneEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    without_oak_on_path(monkeypatch)
    result = invoke("bench", "task-loop", "--subjects", "git,oak", "--runs", "2", "--results", str(lane_env.results))
    assert result.exit_code == 0, result.output
    rows = latest_rows(lane_env.results, "task-loop")
    loop = totals(rows, "task_loop.total")
    assert [(t["subject"], t["run"]) for t in loop] == [("git", 0), ("git", 1)]
    for total in loop:
        assert total["returncode"] == 0
        assert total["oracle_payload_on_remote_branch"] is True
        assert total["oracle_by_phase"] == {"task": True, "followup": True}
        assert total["summarized_operations"] == TASK_LOOP_OPS
        assert total["tool_call_count"] == len(TASK_LOOP_OPS)
        assert total["estimated_total_tokens"] > 0 and total["coverage_complete"] is True
        assert total["remote_transport"] == "local_file" and total["remote_server"] is None
        assert total["network_bytes"] is None and "not observed" in total["network_bytes_reason"]
        assert total["followup_warm_delta_ms"] == pytest.approx(
            total["acquire_ms_followup"] - total["acquire_ms_task"], abs=0.01
        )
        assert total["describe_calls"] == 0 and "commit message" in total["describe_note"]
        assert total["measurement_lock"] == "private"  # ORCHARD_LOCK_FILE is set for tests
        assert total["subject_version"].startswith("git version") and len(total["subject_binary_sha256"]) == 64
        for key in COMPARABILITY_KEYS:
            assert key in total
        branches = set(total["workspace_branches"].values())
        assert len(branches) == 2 and all(b.startswith("bench/") for b in branches)
    steps = [r for r in rows if r["scenario"] == "task_loop" and r["step_kind"] in ("vcs", "edit")]
    assert all(r["tool_call_count"] == 1 and r["elapsed_ms"] > 0 for r in steps)
    harness = [r for r in rows if r["step_kind"] == "harness"]
    assert harness and all(r["tool_call_count"] == 0 and "estimated_total_tokens" not in r for r in harness)
    skips = [r for r in rows if r["subject"] == "oak"]
    assert [(r["returncode"], r["operation"]) for r in skips] == [(77, "task_loop.skipped")] * 2
    assert "no oak binary" in skips[0]["skip_reason"]
    summary = (lane_env.results / "task-loop").glob("*.md").__next__().read_text()
    assert (
        "| `git` | 0 | local_file |" in summary
        and "`git` describe: git's task description is its commit message" in summary
    )
    assert "| `oak` | task_loop | 0 | no oak binary" in summary
    with sqlite3.connect(lane_env.results / "index.db") as db:
        count = db.execute("SELECT count(*) FROM rows WHERE lane='task-loop'").fetchone()[0]
    assert count == len(latest_rows(lane_env.results, "task-loop", warmup=True))
    assert lane_env.leftovers() == []


@pytest.mark.slow
def test_daemon_transport_measures_network_bytes_and_stops_its_servers(lane_env: LaneEnv) -> None:
    result = invoke(
        "bench",
        "task-loop",
        "--subjects",
        "git",
        "--runs",
        "1",
        "--git-remote",
        "daemon",
        "--scenarios",
        "task_loop,agent_task_baseline_v1",
        "--results",
        str(lane_env.results),
    )
    assert result.exit_code == 0, result.output
    rows = latest_rows(lane_env.results, "task-loop")
    (loop,) = totals(rows, "task_loop.total")
    assert loop["remote_transport"] == "git_daemon_loopback" and loop["remote_server"] == "127.0.0.1"
    assert loop["oracle_payload_on_remote_branch"] is True
    publishes = [r for r in rows if r["operation"] in ("task.publish", "followup.publish")]
    assert all(r["network_client_to_server_bytes"] > 0 and r["network_server_to_client_bytes"] > 0 for r in publishes)
    edits = [r for r in rows if r["operation"] == "task.edit"]
    assert edits[0]["network_connections"] == 0
    assert loop["network_bytes"] == sum(
        r["network_client_to_server_bytes"] + r["network_server_to_client_bytes"]
        for r in rows
        if r["scenario"] == "task_loop" and r["step_kind"] in ("vcs", "edit")
    )
    (agent,) = totals(rows, "agent_task.total")
    cold = next(r for r in rows if r["operation"] == "cold.acquire")
    assert cold["network_server_to_client_bytes"] > 0
    assert agent["oracle_payload_on_remote_branch"] is True
    assert lane_env.leftovers() == []  # the fixture's git daemon is checked by lane_env on teardown


def test_agent_task_baseline_marks_ci_unmeasured(lane_env: LaneEnv) -> None:
    result = invoke(
        "bench",
        "task-loop",
        "--subjects",
        "git",
        "--runs",
        "1",
        "--scenarios",
        "agent_task_baseline_v1",
        "--results",
        str(lane_env.results),
    )
    assert result.exit_code == 0, result.output
    rows = latest_rows(lane_env.results, "task-loop")
    (total,) = totals(rows, "agent_task.total")
    assert total["oracle_payload_on_remote_branch"] is True
    assert total["coverage_complete"] is False
    assert total["unmeasured_operations"] == ["cold.ci.observe", "warm.ci.observe"]
    assert total["acquisition_models"] == {"cold": "fresh_full_clone", "warm": "shared_object_worktree"}
    ci = next(r for r in rows if r["operation"] == "cold.ci.observe")
    assert ci["returncode"] == 77 and "CI" in ci["skip_reason"]
    ops = [
        r["operation"] for r in rows if r["scenario"] == "agent_task_baseline_v1" and r["step_kind"] in ("vcs", "edit")
    ]
    assert ops[0] == "cold.acquire" and "warm.acquire" in ops and ops[-1] == "warm.cleanup"


def test_github_without_remote_is_a_skip_row(lane_env: LaneEnv) -> None:
    result = invoke(
        "bench",
        "task-loop",
        "--subjects",
        "git",
        "--runs",
        "1",
        "--git-remote",
        "github",
        "--results",
        str(lane_env.results),
    )
    assert result.exit_code == 0, result.output
    (skip,) = latest_rows(lane_env.results, "task-loop")
    assert skip["returncode"] == 77 and "GIT_BENCH_REMOTE" in skip["skip_reason"]


def test_unknown_scenario_lists_the_valid_ones(lane_env: LaneEnv) -> None:
    result = invoke(
        "bench",
        "task-loop",
        "--subjects",
        "git",
        "--scenarios",
        "task_loop,warp_drive",
        "--results",
        str(lane_env.results),
    )
    assert result.exit_code == 2
    assert "unknown scenario warp_drive; valid: task_loop, agent_task_baseline_v1" in result.output
    assert not lane_env.results.exists()


def test_push_that_lies_fails_the_oracle(lane_env: LaneEnv) -> None:
    liar = lane_env.wrapper("liar-git", 'if [ "$1" = push ]; then exit 0; fi\nexec git "$@"\n')
    result = invoke(
        "bench", "task-loop", "--subjects", f"liar:git={liar}", "--runs", "1", "--results", str(lane_env.results)
    )
    assert result.exit_code == 1
    (total,) = totals(latest_rows(lane_env.results, "task-loop"), "task_loop.total")
    assert total["oracle_payload_on_remote_branch"] is False
    assert total["returncode"] == 1 and "oracle" in total["failure_reason"]
    assert "| `liar` | task_loop | 0 | oracle" in result.output


@pytest.mark.slow
def test_hanging_step_times_out_and_the_next_subject_runs(lane_env: LaneEnv) -> None:
    hang = lane_env.wrapper("hang-git", 'if [ "$1" = status ]; then sleep 60; fi\nexec git "$@"\n')
    result = invoke(
        "bench",
        "task-loop",
        "--subjects",
        f"hang:git={hang},git",
        "--runs",
        "1",
        "--step-timeout",
        "1",
        "--results",
        str(lane_env.results),
    )
    assert result.exit_code == 1
    rows = latest_rows(lane_env.results, "task-loop")
    stuck = next(r for r in rows if r["subject"] == "hang" and r["operation"] == "task.inspect")
    assert stuck["timed_out"] is True and stuck["returncode"] != 0 and stuck["elapsed_ms"] < 30_000
    hang_total, git_total = totals(rows, "task_loop.total")
    assert hang_total["returncode"] == 1 and hang_total["timed_out"] is True
    assert git_total["subject"] == "git" and git_total["returncode"] == 0
    assert lane_env.leftovers() == []


def test_keep_workdirs_keeps_them(lane_env: LaneEnv) -> None:
    result = invoke(
        "bench", "task-loop", "--subjects", "git", "--runs", "1", "--keep-workdirs", "--results", str(lane_env.results)
    )
    assert result.exit_code == 0, result.output
    (kept,) = lane_env.leftovers()
    assert (lane_env.temp / kept / "task_loop-git-r0" / "base" / ".git").is_dir()


def test_ctrl_c_stops_servers_and_removes_workdirs(lane_env: LaneEnv) -> None:
    slow = lane_env.wrapper("slow-git", 'if [ "$1" = status ]; then sleep 60; fi\nexec git "$@"\n')
    args = [
        "bench",
        "task-loop",
        "--subjects",
        f"slow:git={slow}",
        "--git-remote",
        "daemon",
        "--runs",
        "1",
        "--results",
        str(lane_env.results),
    ]
    with cli_process(args, lane_env.temp) as process:
        daemons = wait_for(process.pid, lambda p: p.cmdline()[1:2] == ["daemon"])
        sleepers = wait_for(process.pid, lambda p: p.name() == "sleep")
        assert daemons and sleepers
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode != 0
    _, alive = psutil.wait_procs(daemons + sleepers, timeout=10)
    assert not alive, [p.pid for p in alive]
    assert lane_env.leftovers() == []
    assert "[warm-up] task_loop subject=slow" in stderr
    assert list((lane_env.results / "task-loop").glob("*.jsonl"))  # rows measured so far are kept


@pytest.mark.slow
def test_the_same_git_at_a_long_path_under_a_long_name_counts_the_same_tokens(
    lane_env: LaneEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tokens must not depend on where a binary lives or what the subject is called."""
    import shutil

    without_oak_on_path(monkeypatch)
    deep = lane_env.bin / "opt" / "a-very-long-install-prefix" / "for-this-vcs" / "bin"
    deep.mkdir(parents=True)
    copy = deep / "vcs-with-a-much-longer-name"
    shutil.copy2(shutil.which("git") or "/usr/bin/git", copy)
    subjects = f"git,a-much-longer-subject-name:git={copy}"
    result = invoke("bench", "task-loop", "--subjects", subjects, "--runs", "1", "--results", str(lane_env.results))
    assert result.exit_code == 0, result.output
    rows = latest_rows(lane_env.results, "task-loop")
    loop = {t["subject"]: t for t in totals(rows, "task_loop.total")}
    short, long = loop["git"], loop["a-much-longer-subject-name"]
    assert short["returncode"] == long["returncode"] == 0
    for field in ("estimated_input_tokens", "estimated_output_tokens", "estimated_total_tokens"):
        assert short[field] == long[field], field
    steps = {s: [r for r in rows if r["subject"] == s and r["step_kind"] in ("vcs", "edit")] for s in loop}
    assert [r["counted_command"] for r in steps["git"]] == [
        r["counted_command"] for r in steps["a-much-longer-subject-name"]
    ]
    assert all(str(copy) in r["command"] for r in steps["a-much-longer-subject-name"] if r["step_kind"] == "vcs")
    assert steps["git"][0]["counted_command"].startswith("BIN worktree add -q -b bench/BENCH_ID/task-SUBJECT-r0 ROOT/")
