"""The backlog: ranking, learning from kills, the opportunities source, and `orchard backlog`."""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from orchard.bench.results import opportunities
from orchard.bench.results.store import RunWriter
from orchard.cli import cli
from orchard.demo.make import make_demo
from orchard.errors import UsageError
from orchard.lab.db.ranking import ranked
from orchard.lab.db.state import LabState
from orchard.lab.loop import backlog
from orchard.lab.records.hypothesis import HypothesisStatus
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.loop_support import add_hypotheses, snapshot


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args])


def _demo(directory: Path) -> Workspace:
    """A demo workspace with two of its hypotheses in the backlog (nothing run)."""
    return make_demo(directory, only=["count-with-dict", "single-write"])


@pytest.fixture
def demo(tmp_path: Path) -> Workspace:
    return _demo(tmp_path / "demo")


@pytest.fixture(scope="module")
def refusing_demo(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """One demo workspace for the commands that must change nothing (each test checks it did not)."""
    return _demo(tmp_path_factory.mktemp("refusing") / "demo")


def listed(ws: Workspace, *extra: str) -> list[dict]:
    result = invoke("backlog", "list", ws.root, "--json", *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


# -- ranking and learning ---------------------------------------------------------------------------


def test_ranking_is_impact_times_confidence_over_effort(lab_state: LabState) -> None:
    add_hypotheses(
        lab_state,
        {"id": "cheap-sure", "impact": 2, "confidence": 0.9, "effort": 1},  # 1.8
        {"id": "big-unsure", "impact": 5, "confidence": 0.3, "effort": 1},  # 1.5
        {"id": "big-costly", "impact": 5, "confidence": 0.8, "effort": 4},  # 1.0
        {"id": "best", "impact": 4, "confidence": 0.75, "effort": 1.5},  # 2.0
        {"id": "tie-later", "impact": 2, "confidence": 0.5, "effort": 1},  # 1.0, added after big-costly
    )
    assert [r.id for r in ranked(lab_state)] == ["best", "cheap-sure", "big-unsure", "big-costly", "tie-later"]
    assert lab_state.hypothesis("best").hypothesis.score == pytest.approx(2.0)
    lab_state.update_hypothesis("best", status=HypothesisStatus.KILLED)
    assert ranked(lab_state)[0].id == "cheap-sure", "only open hypotheses are ranked for work"
    everything = ranked(lab_state, (HypothesisStatus.OPEN, HypothesisStatus.KILLED))
    assert everything[0].id == "best"


def test_a_kill_lowers_the_confidence_of_its_siblings_only(lab_state: LabState) -> None:
    add_hypotheses(
        lab_state,
        {"id": "killed", "metric": "report/wall_ms", "scope": ["wordfreq/count.py"], "confidence": 0.8},
        {"id": "same-file", "metric": "report/wall_ms", "scope": ["wordfreq/count.py"], "confidence": 0.5},
        {"id": "same-dir", "metric": "report/wall_ms", "scope": ["wordfreq/"], "confidence": 0.6},
        {"id": "other-file", "metric": "report/wall_ms", "scope": ["wordfreq/report.py"], "confidence": 0.5},
        {"id": "other-metric", "metric": "report/stdout_bytes", "scope": ["wordfreq/count.py"], "confidence": 0.5},
        {"id": "already-landed", "metric": "report/wall_ms", "scope": ["wordfreq/count.py"], "confidence": 0.5},
    )
    lab_state.update_hypothesis("already-landed", status=HypothesisStatus.LANDED)
    lab_state.update_hypothesis("killed", status=HypothesisStatus.KILLED)
    lowered = backlog.learn_from_kill(lab_state, lab_state.hypothesis("killed"))
    assert sorted(lowered) == ["same-dir", "same-file"]
    confidence = {r.id: r.hypothesis.confidence for r in lab_state.hypotheses()}
    assert confidence == {"killed": 0.8, "same-file": 0.4, "same-dir": 0.48, "other-file": 0.5,
                          "other-metric": 0.5, "already-landed": 0.5}
    # it moves the ranking: the sibling now ranks below the untouched hypothesis it tied with
    order = [r.id for r in ranked(lab_state)]
    assert order.index("other-file") < order.index("same-file")


def _lane_row(subject: str, run: int, calls: int, tokens: int) -> dict:
    return {"subject": subject, "scenario": "task_loop", "operation": "task_loop.total", "step_kind": "total",
            "run": run, "returncode": 0, "remote_transport": "local_file", "elapsed_ms": 100.0 + run,
            "tool_call_count": calls, "estimated_total_tokens": tokens, "stdout_bytes": 0, "stderr_bytes": 0}


def write_lane_rows(results: Path) -> None:
    """A small task-loop run where `oak` pays more calls and tokens than `git`."""
    with RunWriter(results, "task-loop") as writer:
        for run in range(3):
            writer.write(_lane_row("oak", run, 18, 520))
            writer.write(_lane_row("git", run, 14, 400))


def test_from_opportunities_fills_metric_and_value_and_leaves_the_cause_to_a_planner(tmp_path: Path) -> None:
    write_lane_rows(tmp_path / "results")
    items = opportunities.rank(tmp_path / "results").items
    assert len(items) >= 2
    made = backlog.from_opportunities(items, top=2)
    assert len(made) == 2
    first, item = made[0], items[0]
    assert first.metric == f"{item.scenario}/{item.metric}"
    assert first.current_value == str(item.value)
    assert item.subject in first.title and item.comparator in first.change
    assert str(item.comparator_value) in first.change
    assert first.suspected_cause == "" and first.lane == "explore" and first.scope == ()
    ratio = item.gap_ratio
    assert first.predicted_effect == pytest.approx(-ratio / (1 + ratio))
    assert first.impact == pytest.approx(min(5.0, 1.0 + item.score))
    assert len({h.id for h in made}) == 2
    # hand-shaped items: a zero gap ratio predicts nothing, a huge one is capped
    shaped = [replace(item, gap_ratio=0.0, score=0.0), replace(item, operation="other", gap_ratio=50.0, score=40.0)]
    flat, huge = backlog.from_opportunities(shaped, top=5)
    assert flat.predicted_effect is None and flat.impact == 1.0
    assert huge.predicted_effect == pytest.approx(-0.9) and huge.impact == 5.0


def test_top_attempted_looks_at_the_best_of_the_whole_backlog(lab_state: LabState) -> None:
    assert not backlog.top_attempted(lab_state, 2), "an empty backlog has nothing attempted"
    add_hypotheses(lab_state, {"id": "a", "impact": 5}, {"id": "b", "impact": 4}, {"id": "c", "impact": 1})
    assert not backlog.top_attempted(lab_state, 2)
    lab_state.update_hypothesis("a", status=HypothesisStatus.LANDED)
    assert not backlog.top_attempted(lab_state, 2)
    lab_state.update_hypothesis("b", status=HypothesisStatus.KILLED)
    assert backlog.top_attempted(lab_state, 2), "the two best were tried, whatever came of them"
    assert not backlog.top_attempted(lab_state, 3)
    lab_state.update_hypothesis("c", status=HypothesisStatus.RUNNING)
    assert backlog.top_attempted(lab_state, 3)


# -- orchard backlog ------------------------------------------------------------------------------------


GOOD = """
[[hypothesis]]
id = "fewer-syscalls"
title = "Write the report with one syscall"
metric = "report/wall_ms"
suspected_cause = "wordfreq/report.py: print() per line"
change = "join the lines and write once"
predicted_effect = -0.05
scope = ["wordfreq/report.py"]
impact = 2
confidence = 0.5
effort = 1
patch = "ready.diff"
"""


def _ready_patch(directory: Path) -> None:
    """The demo lab runs the `patch` launcher: a hypothesis added to it brings its ready diff."""
    (directory / "ready.diff").write_text("--- a/wordfreq/report.py\n+++ b/wordfreq/report.py\n")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (GOOD.replace("effort = 1", "effort = "), "invalid TOML"),
        (GOOD + 'speed = "fast"\n', "#2.speed: unknown field"),
        (GOOD.replace('metric = "report/wall_ms"\n', ""), "#2.metric: missing"),
        (GOOD.replace("impact = 2", "impact = -1"), "#2.impact: expected a number from 1 to 5, got -1"),
        (GOOD.replace('scope = ["wordfreq/report.py"]', 'scope = "wordfreq/report.py"'), "#2.scope: expected a list"),
        (GOOD + GOOD, "duplicate id 'fewer-syscalls'"),
        ("[hypotheses]\nid = 'x'\n", "unknown top-level key(s) hypotheses"),
        (
            GOOD.replace("fewer-syscalls", "count-with-dict"),
            "already in the backlog: count-with-dict; nothing was added",
        ),
    ],
)
def test_a_malformed_file_is_refused_whole_naming_file_and_problem(
    refusing_demo: Workspace, tmp_path: Path, text: str, problem: str
) -> None:
    demo = refusing_demo
    path = tmp_path / "mine.toml"
    _ready_patch(tmp_path)
    # a good hypothesis first: a problem in any table keeps every one of them out
    path.write_text(GOOD.replace("fewer-syscalls", "first-and-fine") + text)
    before, backlog_md = snapshot(demo.root), (demo.root / "backlog.md").exists()
    result = invoke("backlog", "add", demo.root, "--file", path)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].startswith("orchard: error: ") and "Traceback" not in result.output
    assert problem in result.output
    assert str(path) in lines[0]
    assert snapshot(demo.root) == before
    assert (demo.root / "backlog.md").exists() == backlog_md
    assert [h["id"] for h in listed(demo)] == ["count-with-dict", "single-write"]


def test_a_missing_file_is_named(refusing_demo: Workspace, tmp_path: Path) -> None:
    result = invoke("backlog", "add", refusing_demo.root, "--file", tmp_path / "nope.toml")
    assert result.exit_code == 2 and f"hypotheses file not found: {tmp_path / 'nope.toml'}" in result.output


def test_add_from_a_file_then_list_and_rank(demo: Workspace, tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(GOOD)
    _ready_patch(tmp_path)
    result = invoke("backlog", "add", demo.root, "--file", path)
    assert result.exit_code == 0, result.output
    assert "added fewer-syscalls (score 1.00): Write the report with one syscall" in result.output
    items = listed(demo)
    assert [h["id"] for h in items] == ["count-with-dict", "fewer-syscalls", "single-write"]
    added = items[1]
    assert added["status"] == "open" and added["score"] == pytest.approx(1.0)
    assert added["scope"] == ["wordfreq/report.py"] and added["predicted_effect"] == -0.05
    state = LabState.open(demo.root)
    try:
        assert state.hypothesis("fewer-syscalls").source == "user"
    finally:
        state.close()
    assert "`fewer-syscalls`" in (demo.root / "backlog.md").read_text()


def test_add_with_flags(demo: Workspace, tmp_path: Path) -> None:
    _ready_patch(tmp_path)
    result = invoke(
        "backlog",
        "add",
        demo.root,
        "--patch",
        tmp_path / "ready.diff",
        "--title",
        "Cache the tokenizer regex",
        "--metric",
        "report/cpu_ms",
        "--cause",
        "wordfreq/tokenize.py: compiles per call",
        "--change",
        "compile once at import",
        "--predicted",
        "-0.1",
        "--scope",
        "wordfreq/tokenize.py",
        "--scope",
        "wordfreq/util/*.py",
        "--impact",
        "5",
        "--confidence",
        "0.9",
        "--effort",
        "1",
        "--lane",
        "explore",
    )
    assert result.exit_code == 0, result.output
    assert "added cache-the-tokenizer-regex (score 4.50)" in result.output
    item = next(h for h in listed(demo) if h["id"] == "cache-the-tokenizer-regex")
    assert item["metric"] == "report/cpu_ms" and item["lane"] == "explore"
    assert item["scope"] == ["wordfreq/tokenize.py", "wordfreq/util/*.py"]
    assert item["suspected_cause"] == "wordfreq/tokenize.py: compiles per call"
    assert item["predicted_effect"] == pytest.approx(-0.1) and item["score"] == pytest.approx(4.5)
    assert listed(demo)[0]["id"] == "cache-the-tokenizer-regex", "it is now the best-ranked"

    before = snapshot(demo.root)
    missing = invoke("backlog", "add", demo.root, "--title", "no metric", "--change", "x")
    assert missing.exit_code == 2 and "flags.metric: missing" in missing.output
    bad = invoke("backlog", "add", demo.root, "--metric", "m", "--change", "x", "--confidence", "0")
    assert bad.exit_code == 2 and "flags.confidence: expected a number above 0 and at most 1, got 0.0" in bad.output
    again = invoke("backlog", "add", demo.root, "--id", "count-with-dict", "--metric", "report/wall_ms",
                   "--change", "x", "--patch", tmp_path / "ready.diff")
    assert again.exit_code == 2
    assert again.output == "orchard: error: flags: already in the backlog: count-with-dict; nothing was added\n"
    assert snapshot(demo.root) == before


@pytest.mark.parametrize("how", ["flags", "file"])
def test_a_hypothesis_for_the_patch_launcher_without_its_patch_is_refused(
    refusing_demo: Workspace, tmp_path: Path, how: str
) -> None:
    """It could only fail once a worker started; refused at once instead, naming it, with nothing added."""
    demo = refusing_demo
    before = snapshot(demo.root)
    if how == "flags":
        result = invoke("backlog", "add", demo.root, "--id", "no-diff", "--metric", "report/wall_ms", "--change", "x")
    else:
        text = GOOD.replace("fewer-syscalls", "no-diff").replace('patch = "ready.diff"\n', "")
        (tmp_path / "mine.toml").write_text(text)
        result = invoke("backlog", "add", demo.root, "--file", tmp_path / "mine.toml")
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert "no-diff: runs with the patch launcher but names no `patch` file (a ready diff)" in result.output
    assert snapshot(demo.root) == before
    assert [h["id"] for h in listed(demo)] == ["count-with-dict", "single-write"]


def test_the_launcher_a_hypothesis_names_decides_whether_it_needs_a_patch(lab_state: LabState, tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text(GOOD.replace('patch = "ready.diff"\n', 'launcher = "ready"\n'))
    [hypothesis] = backlog.parse_tables(tomllib.loads((tmp_path / "mine.toml").read_text()), source="mine")
    with pytest.raises(UsageError, match="fewer-syscalls: runs with the patch launcher but names no `patch` file"):
        backlog.add_all(lab_state, [hypothesis], source="user", origin="mine", launchers={"ready": "patch"},
                        default_launcher="claude")
    backlog.add_all(lab_state, [hypothesis], source="user", origin="mine", launchers={"ready": "claude"},
                    default_launcher="patch")
    assert lab_state.has_hypothesis("fewer-syscalls")


def test_add_from_opportunities(demo: Workspace) -> None:
    empty = invoke("backlog", "add", demo.root, "--from-opportunities", "2")
    assert empty.exit_code == 2 and "no opportunities" in empty.output
    write_lane_rows(demo.results_dir)
    result = invoke("backlog", "add", demo.root, "--from-opportunities", "1")
    assert result.exit_code == 0, result.output
    state = LabState.open(demo.root)
    try:
        added = [r for r in state.hypotheses() if r.source == "opportunities"]
    finally:
        state.close()
    assert len(added) == 1 and added[0].hypothesis.metric.startswith("task_loop/")
    assert added[0].hypothesis.lane == "explore"


def test_list_all_and_rank_write_backlog_md(demo: Workspace) -> None:
    state = LabState.open(demo.root)
    try:
        state.update_hypothesis("count-with-dict", status=HypothesisStatus.KILLED)
    finally:
        state.close()
    assert [h["id"] for h in listed(demo)] == ["single-write"]
    everything = listed(demo, "--all")
    assert {h["id"]: h["status"] for h in everything} == {"count-with-dict": "killed", "single-write": "open"}
    assert set(everything[0]) >= {
        "id",
        "status",
        "score",
        "title",
        "metric",
        "scope",
        "impact",
        "confidence",
        "effort",
        "lane",
        "change",
        "suspected_cause",
        "predicted_effect",
    }

    result = invoke("backlog", "rank", demo.root)
    assert result.exit_code == 0, result.output
    assert f"wrote {demo.root / 'backlog.md'}" in result.output
    text = (demo.root / "backlog.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "`" in line]
    assert rows[0].startswith("| 1 | `single-write` |") and "| open |" in rows[0]
    assert rows[1].startswith("| - | `count-with-dict` |") and "| killed |" in rows[1]
    assert "| 4.00 |" in rows[1] and "-60%" in rows[1] and "wordfreq/count.py" in rows[1]


def test_an_iterate_adds_a_numbered_sharpened_child_that_never_collides(demo: Workspace) -> None:
    state = LabState.open(demo.root)
    try:
        ids = []
        parent = "single-write"
        for _ in range(3):
            child = backlog.sharpen(state, state.hypothesis(parent).hypothesis, ["promising but unclear"])
            state.add_hypothesis(child, source="iterate", parent=parent)
            ids.append(child.id)
            parent = child.id
        assert ids == ["single-write-r1", "single-write-r2", "single-write-r3"]
        notes = state.hypothesis("single-write-r3").hypothesis.notes
        assert "learned from single-write-r2: promising but unclear" in notes
    finally:
        state.close()


def test_an_empty_backlog_says_so(demo: Workspace) -> None:
    state = LabState.open(demo.root)
    try:
        for hypothesis in ("count-with-dict", "single-write"):
            state.update_hypothesis(hypothesis, status=HypothesisStatus.KILLED)
    finally:
        state.close()
    shown = invoke("backlog", "list", demo.root)
    assert shown.exit_code == 0, shown.output
    assert shown.output.startswith("the backlog is empty of open hypotheses (--all shows the attempted ones too)")
    assert "orchard backlog add" in shown.output
    assert "count-with-dict" in invoke("backlog", "list", demo.root, "--all").output
    assert listed(demo) == []  # --json stays a list a script can read
