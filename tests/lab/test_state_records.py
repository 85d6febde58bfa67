"""lab.db (schema versions, transactions) and the notebook rendered from it, with `orchard status` and
`orchard report` on real workspaces."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from orchard.bench.deciding.verdict import Verdict, VerdictWord
from orchard.cli import cli
from orchard.demo.make import make_demo
from orchard.errors import UsageError
from orchard.lab.db.schema import SCHEMA_VERSION
from orchard.lab.db.state import LabState
from orchard.lab.loop.stop import final_verdict
from orchard.lab.notebook import files as records
from orchard.lab.records.agent_usage import AgentUsage
from orchard.lab.records.events import BaselineRebuilt, ExperimentStarted, LabStopped
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import HypothesisStatus, Lane
from orchard.lab.records.judgment import Decision, Judgment, JudgmentEntry, Rule
from orchard.lab.records.lab_start import LabStart
from orchard.lab.records.land_steps import MainPublished, Merged
from orchard.lab.records.measured_events import FinalVerdictTaken, Swept
from orchard.lab.workers.vcs import VcsError
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.loop_support import add_hypotheses, bare_candidate, metric, verdict_of

BASE, BENCH = "a1" * 20, "b2" * 20
MERGE, LAND_COMMIT = "c3" * 20, "d4" * 20


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args])


# -- schema versions --------------------------------------------------------------------------------


def _stamp(path: Path, version: str) -> bytes:
    """A lab.db with one hypothesis whose schema version now reads `version`; its bytes."""
    state = LabState(path)
    add_hypotheses(state, {"id": "keep-me", "scope": ["a.py"]})
    state.set_meta("schema_version", version)
    state.close()
    return path.read_bytes()


@pytest.mark.parametrize(("version", "advice"), [(str(SCHEMA_VERSION + 1), "Upgrade orchard to open it."),
                                                 ("0", "Use the orchard that made it.")])
def test_a_database_of_another_schema_is_refused_and_left_as_it_was(
    make_workspace: Callable[..., Workspace], version: str, advice: str
) -> None:
    ws = make_workspace()
    db = ws.root / "lab.db"
    before = _stamp(db, version)
    with pytest.raises(UsageError) as refused:
        LabState(db)
    message = str(refused.value)
    assert f"(lab schema {version})" in message and f"reads schema {SCHEMA_VERSION}" in message
    assert advice in message and "Nothing was changed." in message
    for command in (
        ["status", ws.root],
        ["run", ws.root],
        ["backlog", "add", ws.root, "--metric", "m", "--change", "c"],
    ):
        result = invoke(*command)
        assert result.exit_code == 2, result.output
        assert result.output.startswith("orchard: error: ") and advice in result.output
    assert db.read_bytes() == before
    assert not (ws.root / "lab.db-wal").exists() or (ws.root / "lab.db-wal").stat().st_size == 0
    assert not (ws.root / "FINAL_REPORT.md").exists() and not list(ws.root.glob("worker-*"))
    raw = sqlite3.connect(db)
    try:
        assert raw.execute("SELECT id FROM hypotheses").fetchall() == [("keep-me",)]
    finally:
        raw.close()


def test_a_file_that_is_not_a_lab_database_is_named_and_untouched(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all\n" * 300)
    with pytest.raises(UsageError, match="garbage.db: not a lab database"):
        LabState(garbage)
    assert garbage.read_bytes() == b"not a database at all\n" * 300
    foreign = tmp_path / "foreign.db"
    raw = sqlite3.connect(foreign)
    raw.execute("CREATE TABLE notes (text TEXT)")
    raw.commit()
    raw.close()
    before = foreign.read_bytes()
    with pytest.raises(UsageError, match=r"foreign.db: not a lab database \(no such table: meta\)"):
        LabState(foreign)
    assert foreign.read_bytes() == before, "not even switched to WAL"


# -- transactions ----------------------------------------------------------------------------------------


def test_a_failed_transaction_leaves_nothing_behind(lab_state: LabState, tmp_path: Path) -> None:
    add_hypotheses(lab_state, {"id": "before", "scope": ["a.py"]})
    with pytest.raises(RuntimeError, match="crash"):
        with lab_state.transaction():
            add_hypotheses(lab_state, {"id": "half", "scope": ["b.py"]})
            lab_state.add_experiment("half", "half", "w1", "exploit", 1, BASE, BENCH, "starting")
            lab_state.update_hypothesis("before", status=HypothesisStatus.RUNNING, attempt=True)
            lab_state.log(ExperimentStarted("half", "w1", "exploit", BASE, "command", "half", "half.log"), "half")
            raise RuntimeError("crash between two writes")
    assert [h.id for h in lab_state.hypotheses()] == ["before"]
    assert lab_state.hypothesis("before").status == "open" and lab_state.hypothesis("before").attempts == 0
    assert lab_state.experiments() == [] and lab_state.events() == []
    # a failing statement half-way does the same, and the database stays usable
    with pytest.raises(sqlite3.IntegrityError):
        with lab_state.transaction():
            lab_state.add_experiment("first", "before", "w1", "exploit", 1, BASE, BENCH, "starting")
            lab_state.add_experiment("first", "before", "w2", "exploit", 1, BASE, BENCH, "starting")
    assert lab_state.experiments() == []
    lab_state.add_experiment("first", "before", "w1", "exploit", 1, BASE, BENCH, "starting")
    assert [e.name for e in lab_state.experiments()] == ["first"]


def test_the_version_moves_with_every_write_of_any_connection_and_only_then(
        lab_state: LabState, tmp_path: Path) -> None:
    """The loop skips deciding while the version stands still: a write it did not see would stall the lab."""
    judge_thread = LabState(tmp_path / "lab.db")  # a judge thread's own connection
    try:
        quiet = lab_state.version()
        lab_state.hypotheses()
        lab_state.experiments()
        assert lab_state.version() == quiet, "reading is not a change"
        lab_state.set_counter("judged", 1)
        mine = lab_state.version()
        assert mine != quiet
        judge_thread.log(BaselineRebuilt(BASE, "run.sh", ("run.sh",), "its files changed"))
        assert lab_state.version() != mine, "another connection's commit is a change too"
        assert lab_state.version() == lab_state.version()
    finally:
        judge_thread.close()


def test_nested_writes_commit_with_the_outer_transaction_only(lab_state: LabState, tmp_path: Path) -> None:
    reader = LabState(tmp_path / "lab.db")  # another process's view, e.g. `orchard status`
    try:
        with pytest.raises(ValueError):
            with lab_state.transaction():
                with lab_state.transaction():
                    add_hypotheses(lab_state, {"id": "inner", "scope": ["a.py"]})
                assert reader.hypotheses() == [], "nothing is visible before the outer commit"
                raise ValueError("the outer step fails after the inner one finished")
        assert lab_state.hypotheses() == [] and reader.hypotheses() == []
        with lab_state.transaction():
            with lab_state.transaction():
                add_hypotheses(lab_state, {"id": "inner", "scope": ["a.py"]})
            lab_state.set_meta("judged", "1")
        assert [h.id for h in reader.hypotheses()] == ["inner"] and reader.meta("judged") == "1"
    finally:
        reader.close()


# -- the notebook from a hand-filled lab.db -----------------------------------------------------------------


def _judged(
    state: LabState,
    name: str,
    decision: str,
    verdict: Verdict,
    reasons: list[str],
    *,
    cost: float,
    rule: str | None = None,
    **fields: str,
) -> None:
    """One experiment judged, recorded the way the loop records it."""
    hypothesis = state.hypothesis(name).hypothesis
    state.add_experiment(name, name, "w1", Lane.EXPLOIT, 1, BASE, BENCH, ExperimentStatus.RUNNING)
    state.update_experiment(
        name,
        status=ExperimentStatus.DONE,
        candidate=bare_candidate(usage=AgentUsage(cost_usd=cost, input_tokens=1000), duration_s=30.0),
        judgment=Judgment(Decision(decision), tuple(reasons), verdict=verdict, build_s=2.0, measure_s=10.0),
        decision=decision,
        reasons=reasons,
        **fields,
    )
    entry = JudgmentEntry(
        hypothesis=name,
        title=hypothesis.title,
        decision=Decision(decision),
        reasons=tuple(reasons),
        metric=hypothesis.metric,
        predicted="-40%",
        cause=hypothesis.suspected_cause,
        rule=None if rule is None else Rule(rule),
        verdict=verdict,
        usage=AgentUsage(cost_usd=cost),
    )
    state.log(entry, name)


def fill(state: LabState) -> None:
    """A lab that calibrated, landed and merged one win, killed one hypothesis, sent one back, and stopped."""
    state.set_meta("metric_directions", json.dumps({"report/wall_ms": "lower", "report/stdout_bytes": "lower"}))
    baseline = {"report/wall_ms": 64.0, "report/stdout_bytes": 11502.0}
    state.add_measurement("baseline", BASE, baseline)
    state.add_measurement("main", BASE, baseline)
    state.log(LabStart(BASE, BENCH, "", "20 A/A pairs, seed 11, machine 5f326dcb", baseline,
                       {"report/wall_ms": 0.05, "report/stdout_bytes": 0.0}))
    add_hypotheses(
        state,
        {"id": "count-with-dict", "title": "Count words with a dict", "scope": ["wordfreq/count.py"], "impact": 5},
        {"id": "single-write", "title": "Write the report at once", "scope": ["wordfreq/cli.py"], "impact": 2},
        {"id": "tokenize-regex", "title": "Tokenize with a regex", "scope": ["wordfreq/tokenize.py"], "impact": 4},
    )
    win = verdict_of(
        [
            metric("report/wall_ms", "improved", -0.40, baseline=64.0, floor=0.05),
            metric("report/stdout_bytes", "no-change", 0.0, interval=(0.0, 0.0), baseline=11502.0, floor=0.0),
        ]
    )
    _judged(
        state,
        "count-with-dict",
        "LAND",
        win,
        win.reasons,
        cost=0.12,
        branch="lab/count-with-dict",
        land_commit=LAND_COMMIT,
        merge_commit=MERGE,
    )
    state.log(Merged("lab/count-with-dict", "main", MERGE, BASE), "count-with-dict")
    state.log(MainPublished("main", MERGE, True), "count-with-dict")
    state.add_measurement("main", MERGE, {"report/wall_ms": 39.0, "report/stdout_bytes": 11502.0}, "count-with-dict")
    state.update_hypothesis("count-with-dict", status=HypothesisStatus.LANDED)
    flat = verdict_of([metric("report/wall_ms", "no-change", -0.01, interval=(-0.03, 0.02), baseline=39.0, floor=0.05)])
    kill = ["no effect beyond the noise floor: every metric within its noise floor"]
    _judged(state, "single-write", "KILL", flat, kill, cost=0.30, rule="no-claim-below-floor")
    state.update_hypothesis("single-write", status=HypothesisStatus.KILLED)
    unclear = verdict_of([metric("report/wall_ms", "inconclusive", -0.08, interval=(-0.15, 0.01), baseline=39.0)])
    iterate = ["promising but unclear: " + "; ".join(unclear.reasons)]
    _judged(state, "tokenize-regex", "ITERATE", unclear, iterate, cost=0.05)
    state.update_hypothesis("tokenize-regex", status=HypothesisStatus.ITERATED)
    add_hypotheses(
        state,
        {
            "id": "tokenize-regex-r1",
            "title": "Tokenize with a regex (sharpened)",
            "scope": ["wordfreq/tokenize.py"],
            "impact": 4,
            "confidence": 0.45,
        },
        source="iterate",
    )
    state.log(LabStopped("the top 5 backlog items have all been attempted"))


@pytest.fixture
def filled(make_workspace: Callable[..., Workspace]) -> Workspace:
    ws = make_workspace()
    state = LabState.open(ws.root)
    try:
        fill(state)
        records.write_notebook(ws, state, final=True)
    finally:
        state.close()
    return ws


def test_leaderboard_shows_the_best_value_its_change_and_the_baseline(filled: Workspace) -> None:
    board = (filled.root / "LEADERBOARD.md").read_text()
    # each number is a paired effect with its interval; no median of one campaign divided by another's
    assert ("| report/wall_ms | lower is better | 64.0 ms | `count-with-dict` (c3c3c3c3c3) "
            "| -40.00% [-41.00%, -39.00%] | - | 5.00% |") in board
    assert "| report/stdout_bytes | lower is better | 11.5 KB | - | - | - | - |" in board


def test_final_report_has_every_metric_change_and_decision_with_its_reasons(filled: Workspace) -> None:
    report = (filled.root / "FINAL_REPORT.md").read_text()
    assert "Stopped: the top 5 backlog items have all been attempted." in report
    assert "3 experiments: 1 landed, 1 killed, 1 iterated." in report
    assert "Not measured yet: the lab measures it when it stops." in report  # never 39/64 of two campaigns
    assert ("- `count-with-dict` on `lab/count-with-dict` (merged as `c3c3c3c3c3`, on `main` in the target): "
            "report/wall_ms improved by -40.00% beyond floor 5.00%") in report
    assert ("- `single-write`: no effect beyond the noise floor: "
            "every metric within its noise floor") in report
    assert "- `tokenize-regex`: promising but unclear: report/wall_ms inconclusive at n=20 (MDE 5.00%)" in report
    next_up = report.split("## Recommended next backlog")[1]
    assert "`tokenize-regex-r1` (score 1.80, exploit): Tokenize with a regex (sharpened)" in next_up
    # what it cost, per launcher (one here: the default claude), each kept win's share of the cost and time
    assert ("| `claude` | 3 | 1 | $0.4700 | 3,000 input | 1.5 min | 6.00 s | 30.0 s | 0 s | $0.4700 "
            "| 2.1 min |") in report


def test_journal_has_each_judgment_with_its_verdict_table(filled: Workspace) -> None:
    journal = (filled.root / "JOURNAL.md").read_text()
    heads = re.findall(r"^## \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC · (\S+)(?: · (\S+))?$", journal, re.MULTILINE)
    assert heads == [("lab-start", ""), ("judgment", "count-with-dict"), ("merge", "count-with-dict"),
                     ("publish", "count-with-dict"),
                     ("judgment", "single-write"), ("judgment", "tokenize-regex"), ("stop", "")]
    assert "| report/wall_ms | 64.0 ms | 5.00% |" in journal  # baseline median and noise floor
    assert "**LAND** · hypothesis `count-with-dict`: Count words with a dict" in journal
    assert "Verdict **PASS** after 20 pairs (seed 7):" in journal
    row = "| report/wall_ms | improved | -40.00% | [-41.00%, -39.00%] | 5.00% | 20 | 5.00% | 64.0 ms | 38.4 ms |"
    assert row in journal
    assert "- branch: lab/count-with-dict" in journal and f"- commit: {MERGE}" in journal
    kill = journal.split("**KILL** · hypothesis `single-write`")[1].split("## ")[0]
    assert "- no effect beyond the noise floor: every metric within its noise floor" in kill
    assert "Verdict **NO-CHANGE**" in kill and "Agent cost: cost_usd 0.3" in kill
    assert "Verdict **INCONCLUSIVE**" in journal.split("**ITERATE** · hypothesis `tokenize-regex`")[1]
    assert "- reason: the top 5 backlog items have all been attempted" in journal


def test_orchard_report_writes_and_prints_the_final_report(filled: Workspace) -> None:
    (filled.root / "FINAL_REPORT.md").unlink()
    (filled.root / "report.html").unlink()
    result = invoke("report", filled.root)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("# Final report")
    assert "3 experiments: 1 landed, 1 killed, 1 iterated." in result.output
    assert (filled.root / "FINAL_REPORT.md").read_text() in result.output
    assert (filled.root / "report.html").exists()


# -- orchard status and report on a fresh demo workspace ------------------------------------------------------


@pytest.fixture
def demo(tmp_path: Path) -> Workspace:
    return make_demo(tmp_path / "demo", only=["count-with-dict", "terse-report", "single-write"])


def test_status_before_any_run(demo: Workspace) -> None:
    result = invoke("status", demo.root, "--json")
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["workspace"] == str(demo.root) and info["workers"] == [] and info["stopped"] is None
    assert info["decisions"] == {"LAND": 0, "KILL": 0, "ITERATE": 0}
    assert [(b["id"], b["score"]) for b in info["backlog"]] == [
        ("count-with-dict", 4.0),
        ("terse-report", 3.2),
        ("single-write", 0.3),
    ]
    assert info["leaderboard"] == [], "nothing is measured before the lab starts"
    assert info["lock"]["state"] in ("free", "held")
    assert info["executor"] == "auto"
    text = invoke("status", demo.root)
    assert text.exit_code == 0, text.output
    assert "no worker is running" in text.output and "decisions: 0 LAND, 0 KILL, 0 ITERATE" in text.output
    assert "backlog (top): count-with-dict (4.0), terse-report (3.2), single-write (0.3)" in text.output
    assert not (demo.root / "FINAL_REPORT.md").exists(), "status only reads"


def test_status_shows_a_running_worker_and_its_log(demo: Workspace) -> None:
    state = LabState.open(demo.root)
    try:
        state.add_experiment("terse-report", "terse-report", "w2", "exploit", 1, BASE, BENCH, "running")
        state.update_hypothesis("terse-report", status=HypothesisStatus.RUNNING, attempt=True)
    finally:
        state.close()
    info = json.loads(invoke("status", demo.root, "--json").output)
    [worker] = info["workers"]
    assert (worker["experiment"], worker["worker"], worker["status"]) == ("terse-report", "w2", "running")
    assert worker["log"] == str(demo.logs_dir / "terse-report.log")
    assert [b["id"] for b in info["backlog"]] == ["count-with-dict", "single-write"]
    text = invoke("status", demo.root).output
    assert "terse-report" in text and "w2" in text


def test_report_before_any_run_recommends_the_backlog(demo: Workspace) -> None:
    result = invoke("report", demo.root)
    assert result.exit_code == 0, result.output
    assert "Stopped: the lab has not stopped." in result.output
    assert "0 experiments: 0 landed, 0 killed, 0 iterated." in result.output
    assert "- `count-with-dict` (score 4.00, exploit): Count words with a dict instead of list scans" in result.output


def test_the_final_verdict_is_the_last_sweep_when_it_measured_the_same_pair(
        make_workspace: Callable[..., Workspace]) -> None:
    """A sweep of main as it is at the stop, against the start, is that verdict: it is not measured twice (the
    workspace has no binaries: a measurement here would fail)."""
    ws = make_workspace()
    end = ws.target_base()
    state = LabState.open(ws.root)
    try:
        state.log(LabStart(BASE, BENCH, "", "20 A/A pairs", {"report/wall_ms": 64.0}, {"report/wall_ms": 0.05}))
        swept = verdict_of([metric("report/wall_ms", "improved", -0.40, baseline=64.0, floor=0.05)])
        state.log(Swept(end, swept))
        said: list[str] = []
        final_verdict(ws, state, say=said.append)
        (taken,) = state.events_of(FinalVerdictTaken)
        assert (taken.event.start, taken.event.end, taken.event.moved) == (BASE, end, True)
        assert taken.event.verdict == swept and "as the last sweep measured this very pair" in said[0]
    finally:
        state.close()


def test_a_sweep_that_could_not_compare_is_no_final_verdict(make_workspace: Callable[..., Workspace]) -> None:
    ws = make_workspace()
    state = LabState.open(ws.root)
    try:
        state.log(LabStart(BASE, BENCH, "", "20 A/A pairs", {"report/wall_ms": 64.0}, {"report/wall_ms": 0.05}))
        state.log(Swept(ws.target_base(), replace(verdict_of([]), verdict=VerdictWord.ERROR)))
        with pytest.raises(VcsError, match=f"checkout --quiet --detach {BASE}"):  # measured afresh: no binaries here
            final_verdict(ws, state)
        assert not state.events_of(FinalVerdictTaken)
    finally:
        state.close()
