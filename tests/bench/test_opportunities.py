"""`orchard opportunities`: ranked gaps versus the best comparator, from real lane rows."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchard.bench.results import opportunities
from orchard.bench.results.store import RunWriter
from orchard.bench.suites.flow_reader import shipped_flow_files
from tests.bench.lanes_support import LaneEnv, assert_no_children, invoke

ITEM_FIELDS = {
    "rank", "lane", "scenario", "operation", "level", "metric", "direction", "subject", "value", "runs",
    "remote_transport", "comparator", "comparator_value", "comparator_transport", "gap", "gap_ratio",
    "weight", "score", "where", "note",
}


CHATTY_NOTE = 'snapshot = "chatty prints a banner before each of the two snapshot commands"'


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """git, a chattier git wrapper, and a git flow that pays a describe call, measured for real."""
    root = tmp_path_factory.mktemp("opportunities")
    env = LaneEnv(root / "results", root / "tmp", root / "bin")
    env.temp.mkdir()
    env.bin.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ORCHARD_LOCK_FILE", str(root / "bench.lock"))
        patch.setattr(tempfile, "tempdir", str(env.temp))
        chatty = env.wrapper(
            "chatty-git", 'echo "chatty: about to run git $1, here is a long banner nobody needs" >&2\nexec git "$@"\n'
        )
        flow = root / "gitnotes.toml"
        git_flow = shipped_flow_files()["git"].read_text()
        text = git_flow.replace('kind = "git"', 'kind = "gitnotes"', 1)
        flow.write_text(
            text.replace("describe = []", 'describe = [{ argv = ["{bin}", "notes", "add", "-m", "{message}"] }]', 1)
        )
        # chatty's flow says in its own words what its snapshot step costs
        chatty_flow = root / "chatty.toml"
        chatty_flow.write_text(
            git_flow.replace('kind = "git"', 'kind = "chatty"', 1).replace("[notes]\n", f"[notes]\n{CHATTY_NOTE}\n", 1)
        )
        result = invoke(
            "bench",
            "task-loop",
            "--subjects",
            f"git,chatty:chatty={chatty},notes:gitnotes=git",
            "--flow",
            str(flow),
            "--flow",
            str(chatty_flow),
            "--runs",
            "1",
            "--results",
            str(env.results),
        )
        assert result.exit_code == 0, result.output
        assert_no_children()
        assert env.leftovers() == []
    listing = invoke("opportunities", "--results", str(env.results), "--json")
    assert listing.exit_code == 0, listing.output
    yield {**json.loads(listing.output), "env": env}


def test_items_rank_gaps_with_where_it_goes(measured: dict) -> None:
    document = measured
    assert document["schema"] == "orchard.opportunities/1"
    assert [s["lane"] for s in document["sources"]] == ["task-loop"]
    items = document["items"]
    assert items and all(set(item) == ITEM_FIELDS for item in items)
    assert [item["rank"] for item in items] == list(range(1, len(items) + 1))
    scores = [item["score"] for item in items]
    assert scores == sorted(scores, reverse=True)
    for item in items:
        assert item["score"] == pytest.approx(item["weight"] * item["gap_ratio"], abs=1e-4)
        assert item["subject"] != item["comparator"] and item["gap"] > 0
    inspect = next(
        i
        for i in items
        if i["subject"] == "chatty" and i["operation"] == "task.inspect" and i["metric"] == "estimated_total_tokens"
    )
    assert inspect["comparator"] in ("git", "notes") and inspect["value"] > inspect["comparator_value"]
    assert inspect["where"][0]["part"] == "task.inspect"
    total = next(
        i
        for i in items
        if i["subject"] == "chatty" and i["operation"] == "task_loop.total" and i["metric"] == "estimated_total_tokens"
    )
    assert len(total["where"]) == 4 and sum(part["share"] for part in total["where"]) <= 1.0


def test_describe_asymmetry_is_an_item_with_the_flows_note(measured: dict) -> None:
    describe = next(
        i
        for i in measured["items"]
        if i["subject"] == "notes" and i["operation"] == "task.describe" and i["metric"] == "tool_call_count"
    )
    assert describe["value"] == 1 and describe["comparator_value"] == 0
    assert "commit message" in describe["note"]
    calls = next(
        i
        for i in measured["items"]
        if i["subject"] == "notes" and i["operation"] == "task_loop.total" and i["metric"] == "tool_call_count"
    )
    assert calls["gap"] == 1 and calls["where"][0]["part"] == "task.describe"
    assert not any(i["subject"] == "git" and i["metric"] == "tool_call_count" for i in measured["items"])


def test_notes_say_what_a_gap_is_in_the_flows_own_words_for_any_step(measured: dict) -> None:
    """Not only `describe`: a flow's note on any step is the note of the gaps that lie in that step."""
    said = "chatty: chatty prints a banner before each of the two snapshot commands"
    snapshot = next(
        i
        for i in measured["items"]
        if i["subject"] == "chatty" and i["operation"] == "task.snapshot" and i["metric"] == "estimated_total_tokens"
    )
    assert snapshot["note"] == said
    inspect = next(
        i
        for i in measured["items"]
        if i["subject"] == "chatty" and i["operation"] == "task.inspect" and i["metric"] == "estimated_total_tokens"
    )
    assert inspect["note"] is None  # no flow says anything about inspect
    total = next(
        i
        for i in measured["items"]
        if i["subject"] == "chatty" and i["operation"] == "task_loop.total" and i["metric"] == "output_bytes"
    )
    assert total["where"][0]["part"] == "task.snapshot" and said in total["note"]
    text = invoke("opportunities", "--results", str(measured["env"].results))
    assert f"note: {said}" in text.output


def test_text_listing_and_bad_results_dir(measured: dict) -> None:
    results = measured["env"].results
    text = invoke("opportunities", "--results", str(results), "--top", "3")
    assert text.exit_code == 0
    assert "where:" in text.output and "source: task-loop" in text.output
    assert len([line for line in text.output.splitlines() if line[:3].strip().isdigit()]) == 3
    missing = invoke("opportunities", "--results", str(results / "nowhere"))
    assert missing.exit_code == 2 and "no such directory" in missing.output


def _row(subject: str, transport: str, run: int, elapsed: float, calls: int) -> dict:
    return {
        "subject": subject,
        "scenario": "task_loop",
        "operation": "task_loop.total",
        "step_kind": "total",
        "run": run,
        "returncode": 0,
        "remote_transport": transport,
        "elapsed_ms": elapsed,
        "tool_call_count": calls,
        "estimated_total_tokens": 100,
        "stdout_bytes": 0,
        "stderr_bytes": 0,
    }


def test_latency_is_never_compared_across_transports(tmp_path: Path) -> None:
    with RunWriter(tmp_path, "task-loop") as writer:
        for run in range(3):
            writer.write(_row("oak", "oak_server", run, 900.0 + run, 15))
            writer.write(_row("git", "local_file", run, 100.0 + run, 14))
    items = opportunities.rank(tmp_path).items
    assert [(i.subject, i.metric) for i in items] == [("oak", "tool_call_count")]
    assert items[0].comparator_transport == "local_file" and items[0].remote_transport == "oak_server"


def test_overlapping_latency_is_noise_not_an_opportunity(tmp_path: Path) -> None:
    with RunWriter(tmp_path, "task-loop") as writer:
        for run, (a, b) in enumerate([(100.0, 104.0), (106.0, 99.0), (103.0, 101.0)]):
            writer.write(_row("a", "local_file", run, a, 14))
            writer.write(_row("b", "local_file", run, b, 14))
    assert opportunities.rank(tmp_path).items == ()


def test_a_single_subject_has_nothing_to_compare(tmp_path: Path) -> None:
    with RunWriter(tmp_path, "task-loop") as writer:
        writer.write(_row("git", "local_file", 0, 100.0, 14))
    ranking = opportunities.rank(tmp_path)
    assert ranking.items == () and "only git measured" in ranking.not_compared[0]
