"""The dashboard's experiment pages, its lineage, and what its summary and tables say (fast, no browser: the
browser tests in test_browser.py open the same pages in Chromium)."""

from __future__ import annotations

import dataclasses
import re
import socket
from typing import Any

import pytest

from orchard.lab.db import workspace_lock
from orchard.lab.db.state import LabState
from orchard.lab.notebook import pages
from orchard.lab.notebook import view as lab_view
from orchard.lab.notebook.serve import Snapshots, bind
from orchard.lab.records.agent_usage import AgentUsage
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import Hypothesis, Lane
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.loop_support import bare_candidate
from tests.lab.test_charts_report import (
    _snapshot,
    lab,  # noqa: F401  (the hand-filled lab: a LAND, a KILL, an ITERATE)
)
from tests.lab.test_state_records import BASE, BENCH, MERGE

PATCH = '''diff --git a/wordfreq/count.py b/wordfreq/count.py
index 1111111..2222222 100644
--- a/wordfreq/count.py
+++ b/wordfreq/count.py
@@ -1,4 +1,4 @@
 def count(words):
-    return sorted(set((w, words.count(w)) for w in words))
+    return sorted(Counter(words).items())
 # "<b>not markup</b>"
'''
LOG = ('{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Edit","input":'
       '{"file_path":"wordfreq/count.py","old_string":"set(","new_string":"Counter("}}]}}\n'
       '{"type":"result","subtype":"success","is_error":false,"result":"counted with a dict","num_turns":2,'
       '"total_cost_usd":0.12,"duration_ms":5000}\nWORKER_DONE_0\n')


@pytest.fixture
def pages_lab(lab: Workspace) -> Workspace:  # noqa: F811
    """The hand-filled lab, its LAND with a patch and a claude log, and an ITERATE child tried from main's merge."""
    state = LabState.open(lab.root)
    try:
        record = state.experiment("count-with-dict")
        assert record.candidate is not None
        state.update_experiment("count-with-dict", candidate=dataclasses.replace(
            record.candidate, patch=PATCH, changed_files=["wordfreq/count.py"], launcher="claude"))
        child = Hypothesis(metric="report/wall_ms", change="regex, compiled once", id="tokenize-regex-r2",
                           title="Tokenize with one compiled regex")
        state.add_hypothesis(child, source="iterate", parent="tokenize-regex")
        state.add_experiment("tokenize-regex-r2", "tokenize-regex-r2", "w2", Lane.EXPLOIT, 2, MERGE, BENCH,
                             ExperimentStatus.RUNNING)
        state.update_experiment("tokenize-regex-r2", candidate=bare_candidate(patch=""))
    finally:
        state.close()
    lab.log_path("count-with-dict").write_text(LOG)
    return lab


def _page(ws: Workspace, name: str) -> str | None:
    state = LabState.open_readonly(ws.root)
    try:
        return Snapshots(ws, state).experiment(name)
    finally:
        state.close()


def _text(html: str) -> str:
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
    return text.replace("&quot;", '"').replace("&#x27;", "'")


def test_an_experiment_page_has_its_coloured_diff_verdict_reasons_and_rendered_log(pages_lab: Workspace) -> None:
    html = _page(pages_lab, "count-with-dict")
    assert html is not None
    # the diff: each line marked, the Python coloured by pygments, the worker's text escaped
    assert "<tr class=del><td><pre>-" in html and "<tr class=add><td><pre>+" in html
    assert "<span class=k>return</span>" in html and "<span class=nf>count</span>" in html
    assert "<b>not markup</b>" not in html and "&lt;b&gt;not markup&lt;/b&gt;" in html
    assert "+1 −1" in _text(html)
    # the verdict table and its reasons, as the journal printed them
    text = _text(html)
    assert "report/wall_ms improved -40.00%" in text and "64.0 ms" in text
    assert "LAND" in text and f"started from {BASE[:10]}" in text and f"merged as {MERGE[:10]}" in text
    # the log: a tool call and the final result, not raw JSON lines
    assert "Edit wordfreq/count.py" in text and "result: success · cost $0.1200 · 2 turns · 5.00 s" in text
    assert '{"type"' not in html


def test_an_experiment_page_of_an_unknown_or_unfinished_experiment(pages_lab: Workspace) -> None:
    assert _page(pages_lab, "no-such-experiment") is None
    html = _page(pages_lab, "single-write")
    assert html is not None and "no patch: the worker changed nothing" in html and "the log is empty" in html


def test_lineage_shows_iterate_children_bases_and_merges(pages_lab: Workspace) -> None:
    page = pages.build_page(_snapshot(pages_lab), live=True)
    lineage = page.sections["lineage"]
    parent = lineage[lineage.index("data-hypothesis='tokenize-regex'"):]
    child = parent[parent.index("data-hypothesis='tokenize-regex-r2'"):]
    assert "ITERATE child hypothesis" in _text(child[:400]) and "tokenize-regex-r2" in child
    by_main = _text(lineage.split("By main")[1])
    assert f"main {MERGE[:10]} (merge of count-with-dict onto {BASE[:10]})" in by_main
    after_merge = by_main.split(f"main {MERGE[:10]}")[1]
    assert "tokenize-regex-r2 running" in after_merge and "count-with-dict LAND" not in after_merge
    assert "href='experiment/tokenize-regex-r2'" in lineage


def test_every_table_is_sortable_and_the_experiments_table_links_each_page(pages_lab: Workspace) -> None:
    page = pages.build_page(_snapshot(pages_lab), live=True)
    for key in ("experiments", "backlog", "leaderboard"):
        assert "<table class=sortable>" in page.sections[key], key
    assert "<a href='experiment/count-with-dict'>" in page.sections["experiments"]
    assert "-40.00%" in page.sections["experiments"]
    report = pages.build_page(_snapshot(pages_lab), live=False).sections["experiments"]
    assert "<a href='#exp-count-with-dict'>" in report and "id='exp-count-with-dict'" in report


def test_tables_carry_units(lab: Workspace) -> None:  # noqa: F811
    """The leaderboard's baseline printed `64` and `11,502`: no unit."""
    board = pages.build_page(_snapshot(lab), live=False).sections["leaderboard"]
    assert "<td class=num>64.0 ms</td>" in board and "<td class=num>11.5 KB</td>" in board


def test_busy_workers_count_only_those_at_work(lab: Workspace) -> None:  # noqa: F811
    """Experiments at the judge are no busy workers: six active experiments on three workers read "6 of 3"."""
    view = _snapshot(lab)
    def worker(status: ExperimentStatus) -> lab_view.WorkerView:
        return lab_view.WorkerView("e", "h", "w1", "exploit", "claude", status, 1.0, "here", "", ())
    statuses = [ExperimentStatus.RUNNING, ExperimentStatus.STARTING, ExperimentStatus.COLLECTED,
                ExperimentStatus.JUDGING, ExperimentStatus.JUDGING, ExperimentStatus.LANDING]
    busy = dataclasses.replace(view, stopped=None, started_at=1.0, worker_slots=3, workers=tuple(map(worker, statuses)))
    assert "2 of 3 workers busy · 4 at the judge" in pages.summary(busy)


def test_a_lab_that_calibrates_says_so(make_workspace: Any) -> None:
    ws = make_workspace()
    LabState.open(ws.root).close()
    assert "not started" in pages.summary(_snapshot(ws))
    with workspace_lock.hold(ws.root):  # what `orchard run` holds while it builds and calibrates the base
        summary = pages.summary(_snapshot(ws))
    assert "calibrating" in summary and "not started" not in summary


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_a_wildcard_bind_prints_addresses_a_browser_reaches(host: str) -> None:
    try:
        sock, binding = bind(host, 0)
    except Exception as error:  # noqa: BLE001  (a machine without IPv6)
        pytest.skip(f"cannot bind {host}: {error}")
    try:
        assert binding.url.startswith(f"http://{socket.gethostname()}:{binding.port}/?token=")
        assert "0.0.0.0" not in binding.url and "[::]" not in binding.url
        assert binding.local_url is not None and binding.token is not None
        assert re.match(r"http://(127\.0\.0\.1|\[::1\]):\d+/\?token=", binding.local_url)
    finally:
        sock.close()


@pytest.mark.parametrize(("usage", "shown"), [
    (AgentUsage(cost_usd=0.0023, input_tokens=1200, output_tokens=100, estimated=True), "$0.0023 (estimated)"),
    (AgentUsage(cost_usd=0.0, input_tokens=0, output_tokens=0), "$0"),  # nothing spent, as everywhere else
])
def test_an_experiment_page_shows_its_agent_cost_as_every_page_does(
    pages_lab: Workspace, usage: AgentUsage, shown: str
) -> None:
    state = LabState.open(pages_lab.root)
    try:
        record = state.experiment("count-with-dict")
        assert record.candidate is not None
        state.update_experiment("count-with-dict", candidate=dataclasses.replace(record.candidate, usage=usage))
    finally:
        state.close()
    html = _page(pages_lab, "count-with-dict")
    assert html is not None and f"agent cost {shown} agent tokens" in _text(html)


def test_a_gate_failed_verdict_shows_its_gate_not_an_empty_table() -> None:
    # issue 34 item 6: a verdict stopped by a gate before any statistics had a metric table with a head only
    from orchard.lab.judge.verdict_view import VerdictView
    from orchard.lab.notebook.html_parts import verdict_html
    from tests.lab.loop_support import verdict_of

    view = VerdictView.from_verdict(verdict_of([], gates=[("report/returncode", False, "exit 1 in 3 of 3 runs")]))
    assert view is not None
    html = verdict_html(view)
    assert "<table" not in html
    text = _text(html)
    assert "Verdict REGRESSED" in text and "no metric compared: a gate failed before any statistics" in text
    assert "gate report/returncode : FAIL (exit 1 in 3 of 3 runs)" in text
