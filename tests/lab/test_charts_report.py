"""The charts and report.html: what they claim is what the verdicts in lab.db measured, and their numbers
read, to the digit, as JOURNAL.md and FINAL_REPORT.md print them."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from orchard.bench.deciding.verdict import Method
from orchard.lab.db.state import LabState
from orchard.lab.notebook import files as records
from orchard.lab.notebook import pages
from orchard.lab.notebook import view as lab_view
from orchard.lab.notebook.chart_cache import ChartCache
from orchard.lab.notebook.main_steps import main_steps
from orchard.lab.records.db import JournalEvent
from orchard.lab.records.lab_start import LabStart
from orchard.lab.records.land_steps import MainChecked, Merged
from orchard.lab.records.measured_events import Swept
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.loop_support import metric, verdict_of
from tests.lab.test_state_records import MERGE, fill

SWEPT = "e5" * 20


@pytest.fixture
def lab(make_workspace: Any) -> Workspace:
    """The hand-filled lab of test_state_records, plus main's check after the merge and a sweep after it."""
    ws = make_workspace()
    state = LabState.open(ws.root)
    try:
        fill(state)
        check = verdict_of([metric("report/wall_ms", "improved", -0.39, interval=(-0.42, -0.36), baseline=64.0,
                                   floor=0.05),
                            _exact("report/stdout_bytes", 11502.0, 11502.0)])
        state.log(MainChecked(check, False), "count-with-dict")
        state.log(Merged("lab/terse", "main", SWEPT, MERGE), "terse")
        second = verdict_of([metric("report/wall_ms", "no-change", 0.01, interval=(-0.02, 0.03), baseline=39.0,
                                    floor=0.05), _exact("report/stdout_bytes", 11502.0, 560.0)])
        state.log(MainChecked(second, False), "terse")
        sweep = verdict_of([metric("report/wall_ms", "improved", -0.38, interval=(-0.40, -0.35), baseline=64.0,
                                   floor=0.05), _exact("report/stdout_bytes", 11502.0, 560.0)])
        state.log(Swept(SWEPT, sweep))
        records.write_notebook(ws, state, final=True)
    finally:
        state.close()
    return ws


def _exact(key: str, before: float, after: float) -> Any:
    result = metric(key, "improved" if after < before else "no-change", after / before - 1,
                    interval=(after / before - 1, after / before - 1), baseline=before, floor=0.0)
    return dataclasses.replace(result, method=Method.EXACT, candidate_median=after)


def _snapshot(ws: Workspace) -> lab_view.LabView:
    state = LabState.open_readonly(ws.root)
    try:
        return lab_view.build(ws, state, live=False)
    finally:
        state.close()


def _figures(page: str) -> dict[str, dict[str, Any]]:
    """The figures report.html draws, by chart id, read back from the page itself."""
    found = re.search(r"orchardDraw\((\[.*\])\);</script>", page, re.DOTALL)
    assert found, "report.html draws no charts"
    return {f["id"]: f["figure"] for f in json.loads(found.group(1).replace("<\\/", "</"))}


def _journal_rows(journal: str) -> list[list[str]]:
    """Every verdict-table row of JOURNAL.md, as cells."""
    return [[c.strip() for c in line.strip("|").split("|")] for line in journal.splitlines()
            if re.match(r"^\| \S+/\S+ \| (improved|regressed|no-change|inconclusive)", line)]


def _html_rows(page: str) -> list[list[str]]:
    rows = re.findall(r"<tr>((?:<td[^>]*>.*?</td>)+)</tr>", page)
    return [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in rows]


def test_report_html_is_one_file_with_plotly_inside_and_no_network(lab: Workspace) -> None:
    page = (lab.root / "report.html").read_text()
    assert pages.plotly_js() in page, "plotly.min.js is inlined"
    ours = page.replace(pages.plotly_js(), "")
    addresses = re.findall(r"""(?:src|href)=["']?([^"' >]+)""", ours)
    # links within the page (an experiment's entry) are no fetch
    assert all(a.startswith(("data:", "#exp-")) for a in addresses), f"nothing is fetched from anywhere: {addresses}"


def test_every_verdict_row_of_the_journal_is_in_report_html_to_the_digit(lab: Workspace) -> None:
    journal = (lab.root / "JOURNAL.md").read_text()
    page = (lab.root / "report.html").read_text()
    journal_rows = _journal_rows(journal.split("· main-check")[0])  # the judgments (main checks are charted)
    assert len(journal_rows) == 4
    html_rows = _html_rows(page)
    for row in journal_rows:
        assert row in html_rows, row


def test_final_report_and_report_html_agree_with_the_journal(lab: Workspace) -> None:
    journal = (lab.root / "JOURNAL.md").read_text()
    final = (lab.root / "FINAL_REPORT.md").read_text()
    page = (lab.root / "report.html").read_text()
    assert "| report/wall_ms | 64.0 ms | 5.00% |" in journal  # the lab's start: baseline and floor
    assert "| report/wall_ms | 64 | 39 | -39.06% |" not in final  # medians of two campaigns are never divided
    wall = next(row for row in _html_rows(page) if row[:1] == ["report/wall_ms"] and len(row) == 7)
    board = next(line for line in (lab.root / "LEADERBOARD.md").read_text().splitlines()
                 if line.startswith("| report/wall_ms"))
    assert wall == ["report/wall_ms", "lower is better", "64.0 ms", "<code>count-with-dict</code> (c3c3c3c3c3)",
                    "-40.00% [-41.00%, -39.00%]", "-", "5.00%"]
    assert board.endswith("| -40.00% [-41.00%, -39.00%] | - | 5.00% |")
    # the experiments chart's hover numbers are the journal's strings
    figure = _figures(page)["experiments-report-wall-ms"]
    shown = {d[0]: (d[3], d[4]) for trace in figure["data"] for d in trace.get("customdata") or []}
    assert shown["count-with-dict"] == ("-40.00%", "[-41.00%, -39.00%]")
    assert "| report/wall_ms | improved | -40.00% | [-41.00%, -39.00%] |" in journal


def test_main_over_time_steps_per_landed_change_against_the_start(lab: Workspace) -> None:
    figures = _figures((lab.root / "report.html").read_text())
    wall = figures["main-report-wall-ms"]
    trace = wall["data"][0]
    assert trace["line"]["shape"] == "hv", "each landed change is a step"
    # start 0; after the merge -39% [-42%, -36%]; the sweep at the second merge measured -38% against the start
    assert trace["y"] == pytest.approx([0.0, -39.0, -38.0])
    assert trace["error_y"]["arrayminus"] == pytest.approx([0.0, 3.0, 2.0])
    assert trace["error_y"]["array"] == pytest.approx([0.0, 3.0, 3.0])
    assert trace["text"] == ["a1a1a1a1a1", MERGE[:10], SWEPT[:10]], "each step carries its commit"
    assert wall["layout"]["xaxis"]["title"]["text"] == "time (UTC)"
    assert wall["layout"]["yaxis"]["title"]["text"] == "change vs lab start (%)<br>lower is better"
    band = wall["layout"]["shapes"][0]
    assert (band["y0"], band["y1"]) == pytest.approx((-5.0, 5.0)), "the noise floor as a band"
    # a deterministic metric: its exact values, no line
    exact = figures["main-report-stdout-bytes"]["data"][0]
    assert exact["mode"] == "markers+text" and exact["y"] == [11502.0, 11502.0, 560.0]
    assert exact["text"] == ["11,502 B", "11,502 B", "560 B"]


def test_a_chain_of_main_checks_multiplies_effects_and_bounds() -> None:
    won = verdict_of([metric("s/wall_ms", "improved", -0.5, interval=(-0.6, -0.4))])
    view_steps = main_steps(
        [JournalEvent(1, 1.0, "lab-start", None, LabStart("a" * 40, "", "", "-")),
         JournalEvent(2, 2.0, "merge", "x", Merged("lab/x", "main", "b" * 40, "a" * 40)),
         JournalEvent(3, 3.0, "main-check", "x", MainChecked(won, False)),
         JournalEvent(4, 4.0, "merge", "y", Merged("lab/y", "main", "c" * 40, "b" * 40)),
         JournalEvent(5, 5.0, "main-check", "y", MainChecked(won, False))],
        {"s/wall_ms": 100.0}, {"s/wall_ms": 0.03})
    last = view_steps[-1].effects[0]
    # (1 - 0.5)^2 - 1; the bounds multiply the same way: (1 - 0.6)^2 - 1 and (1 - 0.4)^2 - 1
    assert (last.effect, last.low, last.high) == pytest.approx((-0.75, -0.84, -0.64))
    assert view_steps[-1].commit == "c" * 40 and not view_steps[-1].paired_with_start


def test_experiments_chart_colours_by_decision_and_lists_the_unjudged(lab: Workspace, make_workspace: Any) -> None:
    view = _snapshot(lab)
    page = pages.build_page(view, live=False)
    figure = json.loads(next(c.figure for c in page.charts if c.id == "experiments-report-wall-ms"))
    traces = {t["name"]: t for t in figure["data"]}
    assert traces["LAND"]["x"] == ["count-with-dict"] and traces["LAND"]["marker"]["color"] == "#2ca02c"
    assert traces["KILL"]["x"] == ["single-write"] and traces["ITERATE"]["x"] == ["tokenize-regex"]
    assert all(t.get("mode") != "lines" for t in figure["data"]), "experiments have their own bases: never joined"
    assert figure["layout"]["xaxis"]["title"]["text"] == "experiment (each against its own base)"
    assert "noise floor ±5.00%" in traces
    # an experiment that ended before any verdict is listed with its reason
    state = LabState.open(lab.root)
    try:
        state.add_experiment("tokenize-regex-r1", "tokenize-regex-r1", "w2", "exploit", 2, "a" * 40, "b" * 40, "done")
        state.update_experiment("tokenize-regex-r1", decision="KILL",
                                reasons=["harness tampered: bench clone changed: suite.toml"])
    finally:
        state.close()
    listed = pages.build_page(_snapshot(lab), live=False).sections["chart-experiments"]
    assert "<code>tokenize-regex-r1</code>" in listed and "harness tampered: bench clone changed: suite.toml" in listed


def test_every_figure_is_valid_plotly(lab: Workspace) -> None:
    """The figures are written as plain data: plotly's own schema (its Python figure objects) accepts each."""
    import plotly.graph_objects as go

    page = pages.build_page(_snapshot(lab), live=False)
    assert {c.id for c in page.charts} >= {"main-report-wall-ms", "experiments-report-wall-ms", "activity"}
    for chart in page.charts:
        figure = go.Figure(json.loads(chart.figure))  # raises ValueError on a property plotly does not know
        assert figure.layout.paper_bgcolor == "white" and figure.data, chart.id
    broken = json.loads(page.charts[0].figure)
    broken["data"][0]["colour"] = "red"
    with pytest.raises(ValueError, match="colour"):
        go.Figure(broken)


def test_the_chart_cache_draws_again_only_when_the_data_changed(lab: Workspace) -> None:
    cache = ChartCache()
    first = cache.charts(_snapshot(lab))
    assert cache.charts(_snapshot(lab)) is first, "the clock alone does not redraw"
    state = LabState.open(lab.root)
    try:
        state.add_experiment("more", "tokenize-regex-r1", "w1", "exploit", 3, "a" * 40, "b" * 40, "running")
    finally:
        state.close()
    assert cache.charts(_snapshot(lab)) is not first


def test_worker_strings_are_escaped(lab: Workspace) -> None:
    state = LabState.open(lab.root)
    try:
        state.add_experiment("evil", "tokenize-regex-r1", "w1", "exploit", 3, "a" * 40, "b" * 40, "done")
        state.update_experiment("evil", decision="KILL", reasons=["<script>alert(1)</script>"])
    finally:
        state.close()
    page = pages.report_html(_snapshot(lab))
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_report_html_of_a_lab_that_never_started(make_workspace: Any) -> None:
    ws = make_workspace()
    state = LabState.open(ws.root)
    try:
        records.write_notebook(ws, state, final=True)
    finally:
        state.close()
    page = (Path(ws.root) / "report.html").read_text()
    assert "no measurements yet" in page and "no experiment yet" in page


def test_a_lab_that_just_started_has_a_readable_time_axis(make_workspace: Any) -> None:
    """One moment on a time axis: a minute either side, not plotly's default of a millisecond."""
    ws = make_workspace()
    state = LabState.open(ws.root)
    try:
        state.log(LabStart("a1" * 20, "b2" * 20, "", "20 A/A pairs", {"report/wall_ms": 64.0},
                           {"report/wall_ms": 0.05}))
    finally:
        state.close()
    [chart] = [c for c in pages.build_page(_snapshot(ws), live=False).charts if c.id == "main-report-wall-ms"]
    low, high = json.loads(chart.figure)["layout"]["xaxis"]["range"]
    assert (datetime.fromisoformat(high) - datetime.fromisoformat(low)).total_seconds() == 120
