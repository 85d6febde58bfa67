"""Lanes driven by flow files alone: strict flows, env, notes, names, versions, warm-up.

`twig` (tests/bench/twig.py) is a third CLI with its own command grammar over git;
it enters every lane through its flow file, with no code change.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from orchard.bench.suites.flow_reader import load_flow
from orchard.errors import UsageError
from tests.bench import twig
from tests.bench.lanes_support import LaneEnv, assert_no_children, edited_flow, invoke, latest_rows, totals

INTERRUPTED = "interrupted_publication_after_request_v1"


def _summary(results: Path, lane: str) -> str:
    return max((results / lane).glob("*.md")).read_text()


def test_cli_names_the_file_and_unknown_key_and_writes_nothing(lane_env: LaneEnv, tmp_path: Path) -> None:
    path = edited_flow(
        tmp_path, 'payload_file = "task-notes.md"', 'payload_file = "task-notes.md"\nenvironment = { A = "1" }'
    )
    result = invoke("bench", "task-loop", "--subjects", "git", "--flow", str(path), "--results", str(lane_env.results))
    assert result.exit_code == 2
    assert f"flow {path}: environment: unknown key" in result.output
    assert not lane_env.results.exists()


def test_a_git_remote_flow_may_not_verify_with_the_subject(tmp_path: Path) -> None:
    path = edited_flow(
        tmp_path,
        "describe = []",
        'describe = []\nverify = [{ argv = ["{bin}", "clone", "-q", "--branch", "{branch}", "{remote}", "{verifier}"], '
        'cwd = "root" }]',
    )
    with pytest.raises(UsageError, match=r"step 'verify': .*harness's own git"):
        load_flow(path)


def test_env_per_flow_and_per_command_reach_the_commands(lane_env: LaneEnv, tmp_path: Path) -> None:
    log = tmp_path / "env.log"
    spy = lane_env.wrapper("spy-git", f'echo "$1 $BENCH_TAG" >> {log}\nexec git "$@"\n')
    flow = edited_flow(
        tmp_path,
        'payload_file = "task-notes.md"',
        'payload_file = "task-notes.md"\nenv = { BENCH_TAG = "flow-{phase}" }',
    )
    flow.write_text(
        flow.read_text().replace(
            'publish = [{ argv = ["{bin}", "push", "-q", "-u", "origin", "{branch}"] }]',
            'publish = [{ argv = ["{bin}", "push", "-q", "-u", "origin", "{branch}"], '
            'env = { BENCH_TAG = "command" } }]',
        )
    )
    result = invoke(
        "bench",
        "task-loop",
        "--subjects",
        f"spy:git={spy}",
        "--flow",
        str(flow),
        "--runs",
        "1",
        "--results",
        str(lane_env.results),
    )
    assert result.exit_code == 0, result.output
    lines = log.read_text().splitlines()
    assert "status flow-task" in lines and "status flow-followup" in lines
    assert "push command" in lines and not any(line.startswith("push flow") for line in lines)


@pytest.mark.slow
def test_twig_enters_the_task_loop_agent_task_and_interrupted_publication_by_its_flow(
    lane_env: LaneEnv, tmp_path: Path
) -> None:
    binary, flow = twig.install(tmp_path)
    result = invoke(
        "bench",
        "task-loop",
        "--subjects",
        f"twig={binary}",
        "--flow",
        str(flow),
        "--runs",
        "1",
        "--scenarios",
        f"task_loop,agent_task_baseline_v1,{INTERRUPTED}",
        "--results",
        str(lane_env.results),
    )
    assert result.exit_code == 0, result.output
    rows = latest_rows(lane_env.results, "task-loop", warmup=True)
    measured = [r for r in rows if not r.get("warmup")]
    (loop,) = totals(measured, "task_loop.total")
    assert loop["oracle_payload_on_remote_branch"] is True and loop["subject_kind"] == "twig"
    (agent,) = totals(measured, "agent_task.total")
    assert agent["returncode"] == 0 and agent["oracle_payload_on_remote_branch"] is True
    (cut,) = totals(measured, "interrupted_publication.total")
    assert cut["returncode"] == 0, cut.get("failure_reason")
    assert cut["fixture_delivery_state"] == "complete_request_observed" and cut["fixture_remote_ref_unchanged"] is True
    assert cut["publish_protocol"] == "git"
    assert not [r for r in rows if r["returncode"] == 77]
    summary = _summary(lane_env.results, "task-loop")
    assert "`twig`" in summary and "twig 0.3 (over git)" in summary and "oak" not in summary
    assert "twig save stages and commits in one call" in summary  # every note, not only describe


@pytest.mark.slow
def test_twig_enters_the_contention_lane_by_its_flow(lane_env: LaneEnv, tmp_path: Path) -> None:
    binary, flow = twig.install(tmp_path)
    result = invoke(
        "bench",
        "contention",
        "--subjects",
        f"twig={binary}",
        "--flow",
        str(flow),
        "--workers",
        "2",
        "--commits",
        "2",
        "--results",
        str(lane_env.results),
    )
    assert result.exit_code == 0, result.output
    runs = totals(latest_rows(lane_env.results, "contention"), "contention.total")
    assert [(r["mode"], r["returncode"]) for r in runs] == [("shared_checkout", 0), ("clone_per_worker", 0)]
    assert all(r["lost_updates"] == 0 and r["fsck_clean"] for r in runs)
    assert all(r["subject_kind"] == "twig" for r in runs)


LANDED = 'landed = { argv = ["{git}", "--git-dir", "{remote_dir}", "rev-parse", "refs/heads/main"], cwd = "root" }'


@pytest.mark.slow
def test_whether_an_interrupted_publication_landed_is_the_flows_probe(lane_env: LaneEnv, tmp_path: Path) -> None:
    """The lane asks the flow's `[interrupted] landed` probe; it knows no CLI's way of asking."""
    binary, flow = twig.install(tmp_path)
    text = flow.read_text()
    assert LANDED in text
    # A probe whose answer moves between before and after says the publication landed: the row fails.
    moving = 'landed = { argv = ["/bin/sh", "-c", "echo x >> calls; wc -l < calls"], cwd = "root" }'
    flow.write_text(text.replace(LANDED, moving))
    args = ("bench", "task-loop", "--subjects", f"twig={binary}", "--flow", str(flow), "--runs", "1",
            "--scenarios", INTERRUPTED, "--results", str(lane_env.results))
    result = invoke(*args)
    assert result.exit_code == 1, result.output
    (cut,) = [r for r in totals(latest_rows(lane_env.results, "task-loop"), "interrupted_publication.total")]
    assert (cut["fixture_landed_before"], cut["fixture_landed_after"]) == ("1", "2")
    assert cut["fixture_remote_ref_unchanged"] is False
    assert "server ref changed behind the fixture" in cut["failure_reason"]
    assert cut["fixture_landed_probe"].startswith("/bin/sh -c")
    # Without the probe there is no claim either way; a misspelt key is refused before anything runs.
    flow.write_text(text.replace(LANDED + "\n", ""))
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    (cut,) = [r for r in totals(latest_rows(lane_env.results, "task-loop"), "interrupted_publication.total")]
    assert cut["fixture_remote_ref_unchanged"] is None and cut["fixture_landed_probe"] is None
    flow.write_text(text.replace("landed = ", "landd = "))
    result = invoke(*args)
    assert result.exit_code == 2 and "interrupted: unknown key `landd`" in result.output


SERVED = "agent_task_oak_local_v1"
MATERIALIZATION = "legacy_selected_clone_materialization_v1"


@pytest.mark.slow
def test_twig_enters_the_owned_server_and_materialization_scenarios_by_its_flow(
    lane_env: LaneEnv, tmp_path: Path
) -> None:
    """The scenarios first written for oak take their server and every command from the flow too."""
    binary, flow = twig.install(tmp_path)
    result = invoke(
        "bench", "task-loop", "--subjects", f"twig={binary},git", "--flow", str(flow), "--runs", "1",
        "--scenarios", f"{SERVED},{MATERIALIZATION}", "--results", str(lane_env.results),
    )
    assert result.exit_code == 0, result.output
    rows = [r for r in latest_rows(lane_env.results, "task-loop", warmup=True) if not r.get("warmup")]
    (served,) = [r for r in totals(rows, "agent_task_oak_local.total") if r["subject"] == "twig"]
    assert served["returncode"] == 0, served.get("failure_reason")
    assert served["oracle_payload_matches"] is True and served["oracle_branch_head_matches"] is True
    assert served["server_process_stopped"] is True and served["remote_transport"] == "loopback_git"
    mine = [r for r in rows if r["subject"] == "twig" and r["scenario"] == SERVED]
    steps = [r["operation"] for r in mine if r["step_kind"] == "vcs"]
    assert steps == [
        "cold.acquire", "cold.inspect", "cold.checkpoint", "cold.publish",
        "followup.acquire", "followup.checkpoint", "followup.publish",
    ]
    (oracle,) = [r for r in mine if r["operation"] == "verify.clone"]
    assert oracle["step_kind"] == "harness" and "twig" not in oracle["command"].split()[0]  # the harness's git
    (clone,) = totals(rows, "legacy_selected_clone_materialization.total")
    assert clone["subject"] == "twig" and clone["returncode"] == 0, clone.get("failure_reason")
    assert clone["oracle_head_matches"] is True and clone["oracle_worktree_bytes_and_modes_match"] is True
    assert clone["network_server_to_client_bytes"] > 0  # the clone went through the byte-counting proxy
    git_skips = {r["scenario"]: r["skip_reason"] for r in rows if r["subject"] == "git" and r["returncode"] == 77}
    assert "[served] serve" in git_skips[SERVED] and "[materialization] import" in git_skips[MATERIALIZATION]
    assert_no_children()


def test_a_served_git_remote_is_verified_by_the_harness_not_the_subject(tmp_path: Path) -> None:
    _, flow = twig.install(tmp_path)
    text = flow.read_text()
    subject_checks = '[{ argv = ["{bin}", "fetch", "{remote}/{repo}.git", "{verifier}"], cwd = "root" }]'
    flow.write_text(text.replace('url = "{remote}/{repo}.git"', f"verify = {subject_checks}"))
    with pytest.raises(UsageError, match=r"twig.toml: served.verify: .*harness's own git"):
        load_flow(flow)
    flow.write_text(text.replace('url = "{remote}/{repo}.git"', 'url = "{remote}/{repository}.git"'))
    with pytest.raises(UsageError, match=r"served.url: unknown placeholder \{repository\}"):
        load_flow(flow)


def test_a_flow_without_what_a_lane_needs_is_a_skip_row_naming_the_keys(lane_env: LaneEnv, tmp_path: Path) -> None:
    binary, flow = twig.install(tmp_path)
    text = flow.read_text()
    flow.write_text(
        text[: text.index("[contention]")]
        .replace("[interrupted]\n", "[interruptedx]\n")
        .replace("[interruptedx]\n", "", 1)
        .replace(
            'acquire = [{ argv = ["{bin}", "fetch", "{remote}", "{workspace}"], cwd = "root" }]\n'
            + text[text.index("landed = ") : text.index("[agent_task]")],
            "",
        )
    )
    result = invoke(
        "bench",
        "contention",
        "--subjects",
        f"twig={binary}",
        "--flow",
        str(flow),
        "--workers",
        "2",
        "--modes",
        "shared_checkout",
        "--results",
        str(lane_env.results),
    )
    assert result.exit_code == 0, result.output
    (skip,) = latest_rows(lane_env.results, "contention")
    assert skip["returncode"] == 77
    for key in ("[contention] clone", "commit_path", "publish"):
        assert key in skip["skip_reason"]
    result = invoke(
        "bench",
        "task-loop",
        "--subjects",
        f"twig={binary}",
        "--flow",
        str(flow),
        "--runs",
        "1",
        "--scenarios",
        INTERRUPTED,
        "--results",
        str(lane_env.results),
    )
    assert result.exit_code == 0, result.output
    skips = [r for r in latest_rows(lane_env.results, "task-loop") if r["returncode"] == 77]
    assert skips and "[interrupted] acquire" in skips[0]["skip_reason"]


def test_a_failed_step_is_named_in_the_row_and_the_summary(lane_env: LaneEnv) -> None:
    broken = lane_env.wrapper(
        "nopush-git", 'if [ "$1" = push ]; then echo "push refused by policy" >&2; exit 5; fi\nexec git "$@"\n'
    )
    result = invoke(
        "bench", "task-loop", "--subjects", f"nopush:git={broken}", "--runs", "1", "--results", str(lane_env.results)
    )
    assert result.exit_code == 1
    (total,) = totals(latest_rows(lane_env.results, "task-loop"), "task_loop.total")
    assert total["failed_operations"] == ["task.publish"]
    assert "task.publish" in total["failure_reason"] and "push refused by policy" in total["failure_reason"]
    summary = _summary(lane_env.results, "task-loop")
    assert "a step failed or timed out" not in summary
    assert "task.publish" in summary.split("## Failed", 1)[1]


def test_versions_are_shown_and_a_failing_version_says_so(lane_env: LaneEnv) -> None:
    mute = lane_env.wrapper(
        "mute-git", 'if [ "$1" = --version ]; then echo "usage: no such option" >&2; exit 3; fi\nexec git "$@"\n'
    )
    result = invoke(
        "bench", "task-loop", "--subjects", f"git,mute:git={mute}", "--runs", "1", "--results", str(lane_env.results)
    )
    assert result.exit_code == 0, result.output
    rows = latest_rows(lane_env.results, "task-loop")
    mute_total = next(r for r in rows if r["subject"] == "mute" and r["operation"] == "task_loop.total")
    assert mute_total["subject_version"] is None
    assert "exit 3" in mute_total["subject_version_error"]
    summary = _summary(lane_env.results, "task-loop")
    assert "git version" in summary and "`--version` failed (exit 3)" in summary
    assert "oak" not in summary


def test_the_oracle_is_the_harness_git_not_the_subject(lane_env: LaneEnv) -> None:
    other = lane_env.wrapper("other-git", 'exec git "$@"\n')
    result = invoke(
        "bench", "task-loop", "--subjects", f"other:git={other}", "--runs", "1", "--results", str(lane_env.results)
    )
    assert result.exit_code == 0, result.output
    verifies = [r for r in latest_rows(lane_env.results, "task-loop") if ".verify" in r["operation"]]
    assert verifies and all(r["command"].startswith(shutil.which("git") or "git") for r in verifies)
    assert not any(str(other) in r["command"] for r in verifies)


def test_each_subject_gets_a_recorded_warm_up_that_is_not_summarized(lane_env: LaneEnv) -> None:
    result = invoke("bench", "task-loop", "--subjects", "git", "--runs", "2", "--results", str(lane_env.results))
    assert result.exit_code == 0, result.output
    loop = totals(latest_rows(lane_env.results, "task-loop", warmup=True), "task_loop.total")
    assert [(r["run"], bool(r.get("warmup"))) for r in loop] == [(-1, True), (0, False), (1, False)]
    summary = _summary(lane_env.results, "task-loop")
    assert "| `git` | 0 |" in summary and "| `git` | 1 |" in summary and "| `git` | -1 |" not in summary
    assert "Warm-up: `git` ran once first" in summary
