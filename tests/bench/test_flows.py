"""Flows: the loop's commands as data; a broken flow file is exit 2 naming file and step."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchard.bench.suites.flow_reader import load_flow, load_flows, shipped_flow_files
from orchard.bench.suites.flows import STEPS
from orchard.errors import UsageError
from tests.bench.lanes_support import LaneEnv, edited_flow, invoke, latest_rows, totals

GIT_FLOW = shipped_flow_files()["git"]


def test_shipped_flows_have_every_step_and_state_the_describe_asymmetry() -> None:
    flows = load_flows()
    assert {"git", "oak"} <= set(flows)
    for flow in flows.values():
        assert set(STEPS) <= set(flow.steps)
    assert flows["git"].step("describe") == ()
    assert "commit message" in flows["git"].notes["describe"]
    assert flows["oak"].step("describe")[0].argv[1] == "desc"
    assert [c.name for c in flows["git"].step("snapshot")] == ["add", "commit"]


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            'publish = [{ argv = ["{bin}", "push", "-q", "-u", "origin", "{branch}"] }]\n',
            "",
            r"step 'publish': missing",
        ),
        ("describe = []", "describe = []\nsnooze = []", r"steps: unknown key `snooze`"),
        ('"{bin}", "add", "."', '"{bin}", "add", "{nowhere}"', r"unknown placeholder \{nowhere\}"),
        ('kind = "git"', 'kind = "gitx"\n[x]', "x: unknown key"),
        ('remote = "git"', 'remote = "svn"', "`remote` must be one of git, oak"),
        ("[notes]\ndescribe", "[notes]\nignored", r"step 'describe': empty step needs \[notes\] describe"),
        ('cwd = "base" },\n]\ninspect', 'cwd = "attic" },\n]\ninspect', "`cwd` must be one of"),
        # strict like suites: unknown keys anywhere, bad env, bad protocol
        ('payload_file = "task-notes.md"', 'payload_file = "task-notes.md"\ncolour = "blue"', r"colour: unknown key"),
        (
            'inspect = [{ argv = ["{bin}", "status", "--porcelain=v1"] }]',
            'inspect = [{ argv = ["{bin}", "status", "--porcelain=v1"], evn = { A = "1" } }]',
            r"step 'inspect'\[0\]: unknown key `evn`",
        ),
        (
            'head = { argv = ["{bin}", "rev-parse", "HEAD"] }',
            'head = { argv = ["{bin}", "rev-parse", "HEAD"], patern = "x" }',
            r"probes.head: unknown key `patern`",
        ),
        (
            'phases = ["cold", "warm"]',
            'phases = ["cold", "warm"]\nlukewarm = []',
            r"agent_task: unknown key `lukewarm`",
        ),
        ('phases = ["cold", "warm"]', 'phases = ["cold", "hot"]', r"agent_task: phase 'hot' has no command list"),
        (
            'payload_file = "task-notes.md"',
            'payload_file = "task-notes.md"\nenv = { GIT_DIR = 3 }',
            r"env: .*GIT_DIR.* must be a string",
        ),
        (
            'payload_file = "task-notes.md"',
            'payload_file = "task-notes.md"\nenv = { X = "{nowhere}" }',
            r"unknown placeholder \{nowhere\}",
        ),
        ('publish_protocol = "git"', 'publish_protocol = "carrier-pigeon"', r"publish_protocol: must be one of"),
        ("[notes]\n", "[notes]\nsnapshot = 3\n", r"notes: .*must be a string"),
    ],
)
def test_broken_flow_is_a_usage_error_naming_file_and_place(tmp_path: Path, old: str, new: str, message: str) -> None:
    path = edited_flow(tmp_path, old, new)
    with pytest.raises(UsageError, match=message) as caught:
        load_flow(path)
    assert str(path) in str(caught.value)


def test_cli_rejects_a_flow_missing_a_step(lane_env: LaneEnv, tmp_path: Path) -> None:
    path = edited_flow(
        tmp_path, 'end = [{ argv = ["{bin}", "worktree", "remove", "--force", "{workspace}"], cwd = "base" }]\n', ""
    )
    result = invoke("bench", "task-loop", "--subjects", "git", "--flow", str(path), "--results", str(lane_env.results))
    assert result.exit_code == 2
    assert f"flow {path}: step 'end': missing" in result.output
    assert not lane_env.results.exists()


def test_a_new_kind_is_measured_by_writing_a_flow(lane_env: LaneEnv, tmp_path: Path) -> None:
    """`gitnotes`: git that describes the task with `git notes`, no code change needed."""
    text = GIT_FLOW.read_text().replace('kind = "git"', 'kind = "gitnotes"', 1)
    text = text.replace("describe = []", 'describe = [{ argv = ["{bin}", "notes", "add", "-m", "{message}"] }]', 1)
    flow = tmp_path / "gitnotes.toml"
    flow.write_text(text)
    result = invoke(
        "bench",
        "task-loop",
        "--subjects",
        "notes:gitnotes=git",
        "--flow",
        str(flow),
        "--runs",
        "1",
        "--results",
        str(lane_env.results),
    )
    assert result.exit_code == 0, result.output
    rows = latest_rows(lane_env.results, "task-loop")
    (total,) = totals(rows, "task_loop.total")
    assert total["subject_kind"] == "gitnotes"
    assert total["oracle_payload_on_remote_branch"] is True
    assert "task.describe" in total["summarized_operations"]
    assert "followup.describe" not in total["summarized_operations"]
    assert total["describe_calls"] == 1
    assert lane_env.leftovers() == []
