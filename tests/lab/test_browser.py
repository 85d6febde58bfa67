"""The dashboard and report.html in a real headless Chromium: they load, follow a running lab without a
reload, draw charts with axes and labels, refuse anonymous readers off loopback, and report.html needs no
network. Screenshots go to the test's temp dir."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchard.demo.make import make_demo
from orchard.lab.workers.workspace.workspace import Workspace
from tests.agents import clis
from tests.agents.demo_lab import broken_tries, demo_lab, run_lab
from tests.agents.endpoint import ScriptedEndpoint
from tests.lab.browser import (
    chart_axes,
    chromium,
    click_tab,
    clipped_titles,
    console_errors,
    needs_chromium,
    screenshot,
    shown,
    text,
)
from tests.lab.lab_helpers import assert_nothing_left, wait_for
from tests.lab.serve_support import fetch, serving, wait_until_served
from tests.lab.test_charts_report import lab  # noqa: F401  (the hand-filled lab with main checks and a sweep)

# slow tier: a real browser; the fast tier checks the same pages without one (test_charts_report: report.html is
# one file with no network; test_serve: 401 without the token off loopback, the cookie after it)
pytestmark = [needs_chromium, pytest.mark.slow]

DEMO = ["count-with-dict", "terse-report", "single-write", "read-whole-file"]


def _assert_charts(driver: Any, at_least: int) -> list[dict[str, Any]]:
    charts = chart_axes(driver)
    assert len(charts) >= at_least, charts
    for chart in charts:
        assert chart["drawn"], chart
        assert chart["title"] and chart["x"] and chart["y"], f"a chart without a title or axis title: {chart}"
        assert chart["xticks"] > 0 and chart["yticks"] > 0, f"a chart without tick labels: {chart}"
    return charts


def test_report_html_renders_with_no_network_and_no_console_errors(lab: Workspace, tmp_path: Path) -> None:  # noqa: F811
    with chromium(tmp_path / "profile", offline=True) as driver:
        driver.get((lab.root / "report.html").as_uri())
        wait_for(lambda: driver.execute_script("return document.querySelectorAll('.chart .main-svg').length") > 0,
                 "report.html to draw its charts", 60)
        charts = _assert_charts(driver, 5)
        if driver.find_elements("css selector", ".tabs"):
            click_tab(driver, "charts")
        assert clipped_titles(driver) == []
        by_id = {c["id"]: c for c in charts}
        assert by_id["main-report-wall-ms"]["x"] == "time (UTC)"
        assert "change vs lab start (%)" in by_id["main-report-wall-ms"]["y"]
        assert {"11,502 B", "560 B"} <= set(by_id["main-report-stdout-bytes"]["labels"]), "exact values, labelled"
        assert "count-with-dict" in text(driver, "experiments") and "-40.00%" in text(driver, "experiments")
        assert console_errors(driver) == []
        screenshot(driver, tmp_path / "report.png")


def test_off_loopback_the_browser_gets_401_without_the_token(tmp_path: Path) -> None:
    ws = make_demo(tmp_path / "demo", only=["count-with-dict", "terse-report"])
    with serving(ws.root, "--host", "127.0.0.2") as server, chromium(tmp_path / "profile") as driver:
        wait_until_served(server)
        driver.get(server.base)
        assert "401" in driver.find_element("tag name", "body").text
        driver.get(server.url)  # the printed address, token included: the page and its own requests get in
        wait_for(lambda: driver.execute_script("return document.body.dataset.version || ''") != "",
                 "the page's first update through the cookie", 60)
        assert "count-with-dict" in text(driver, "backlog")
        assert [e for e in console_errors(driver) if "401" not in e] == []


@pytest.mark.timeout(1800)
def test_dashboard_follows_a_running_demo_lab(tmp_path: Path, mark: str) -> None:
    ws = make_demo(tmp_path / "lab", workers=3, executor="subprocess", only=DEMO)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    env = {**os.environ, "ORCHARD_TEST_MARK": mark}
    with serving(ws.root, mark=mark) as server, chromium(tmp_path / "profile") as driver:
        wait_until_served(server)
        driver.get(server.url)
        wait_for(lambda: driver.execute_script("return document.body.dataset.version || ''") != "",
                 "the dashboard's first update", 60)
        driver.execute_script("window.orchardSameLoad = true")  # gone if the page ever reloads
        assert "no worker is running" in text(driver, "workers")
        run = subprocess.Popen([sys.executable, "-m", "orchard", "run", str(ws.root)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            # the workers appear, with their launcher, state and host
            wait_for(lambda: any(name in text(driver, "workers") for name in DEMO), "a running worker", 300)
            workers = text(driver, "workers")
            assert "patch" in workers and ("running" in workers or "starting" in workers or "collected" in workers)
            screenshot(driver, shots / "dashboard-workers.png")
            # an experiment is judged: its decision shows up without a reload
            wait_for(lambda: any(d in text(driver, "experiments") for d in ("LAND", "KILL")), "a judgment", 600)
            assert driver.execute_script("return window.orchardSameLoad === true"), "the page was reloaded"
            assert run.wait(timeout=900) == 0
        finally:
            if run.poll() is None:
                run.terminate()
                run.wait(timeout=60)
        wait_for(lambda: "stopped:" in text(driver, "summary"), "the stop on the dashboard", 60)
        assert driver.execute_script("return window.orchardSameLoad === true"), "the page was reloaded"
        experiments = text(driver, "experiments")
        for name in DEMO:
            assert name in experiments, name
        # the demo's bench edit is refused by the sandbox: its worker is KILLed unjudged, listed beside the chart
        assert "read-whole-file (KILL): the worker did not finish" in text(driver, "chart-experiments"), \
            "an experiment without a verdict is listed"
        assert "LAND" in text(driver, "journal") and "lab-start" in text(driver, "journal")
        _assert_charts(driver, 4)
        assert console_errors(driver) == []
        screenshot(driver, shots / "dashboard.png")
    with chromium(tmp_path / "profile-offline", offline=True) as driver:
        driver.get((ws.root / "report.html").as_uri())
        wait_for(lambda: driver.execute_script("return document.querySelectorAll('.chart .main-svg').length") > 0,
                 "report.html to draw its charts", 60)
        _assert_charts(driver, 4)
        assert console_errors(driver) == []
        screenshot(driver, shots / "report.png")
    assert_nothing_left(mark, None)


# -- experiment pages, tabs and sorting, on one finished lab whose claude worker is the real CLI -----------------


@pytest.fixture(scope="module")
def agent_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    """The demo target, two experiments: longest-word-one-pass by the real Claude Code against the scripted
    endpoint (its edit breaks a unit test: KILL, with a diff and a stream-json log), count-with-dict by the demo's
    patch launcher (LAND, with a verdict)."""
    clis.claude()
    root = tmp_path_factory.mktemp("agent-lab")
    server = ScriptedEndpoint.start(Path("claude-demo.toml"), root / "endpoint.jsonl")
    try:
        ws = demo_lab(root / "lab", {"claude": {"name": "claude", "base_url": server.url}},
                      {"count-with-dict": "", "longest-word-one-pass": "claude"})
        experiments = run_lab(ws)
    finally:
        server.stop()
    # both start at once, and the lab stops when they are judged: an ITERATE (noise let the broken change's
    # verdict PASS) adds a child no worker tries
    assert broken_tries(experiments) == ["longest-word-one-pass"]
    assert {name: record.decision for name, record in experiments.items()} == {
        "count-with-dict": "LAND", "longest-word-one-pass": experiments["longest-word-one-pass"].decision}
    yield ws


def _keep(driver: Any, name: str, tmp: Path) -> None:
    """A screenshot of the window into the test's temp dir, and into $ORCHARD_SCREENSHOTS (docs/img) when set."""
    for directory in (tmp, Path(os.environ.get("ORCHARD_SCREENSHOTS", "") or tmp)):
        driver.save_screenshot(str(directory / name))


@pytest.mark.timeout(1800)
def test_the_experiment_page_shows_the_diff_the_verdict_and_the_agents_log(agent_lab: Workspace,
                                                                           tmp_path: Path) -> None:
    with serving(agent_lab.root) as server, chromium(tmp_path / "profile", height=1000) as driver:
        wait_until_served(server)
        driver.get(server.base + "experiment/longest-word-one-pass")
        assert "Experiment longest-word-one-pass" in driver.find_element("tag name", "h1").text
        facts = text(driver, "facts")
        assert ("KILL" in facts or "ITERATE" in facts) and "claude" in facts and "started from" in facts
        assert "unit tests" in text(driver, "tab-verdict") or "test" in text(driver, "tab-verdict")
        click_tab(driver, "diff")
        assert shown(driver, "tab-diff") and not shown(driver, "tab-verdict")
        diff = text(driver, "tab-diff")
        assert "wordfreq/stats.py" in diff
        marked = "return document.querySelectorAll('#tab-diff tr.add, #tab-diff tr.del').length"
        assert driver.execute_script(marked) > 1
        coloured = driver.execute_script("return document.querySelectorAll('#tab-diff tr.add span.k').length")
        assert coloured > 0, "the Python keywords of the added lines are coloured"
        _keep(driver, "dashboard-experiment-diff.png", tmp_path)
        click_tab(driver, "log")
        log = text(driver, "tab-log")
        # the agent's tool calls and its final result, as what they are: no raw JSON lines
        assert "Read " in log and "Edit " in log and "result: success" in log, log
        assert '{"type"' not in log
        _keep(driver, "dashboard-experiment-log.png", tmp_path)
        driver.get(server.base + "experiment/count-with-dict")
        verdict = text(driver, "tab-verdict")
        assert "Verdict" in verdict and "metric" in verdict and "improved" in verdict
        assert driver.execute_script("return document.querySelectorAll('#tab-verdict table.sortable tr').length") > 1
        _keep(driver, "dashboard-experiment-verdict.png", tmp_path)
        assert console_errors(driver) == []
        status, _, _ = fetch(server.base + "experiment/no-such-experiment")
        assert status == 404


@pytest.mark.timeout(1800)
def test_the_dashboard_has_tabs_sortable_tables_and_a_lineage(agent_lab: Workspace, tmp_path: Path) -> None:
    with serving(agent_lab.root) as server, chromium(tmp_path / "profile", height=1000) as driver:
        wait_until_served(server)
        driver.get(server.url)
        wait_for(lambda: driver.execute_script("return document.body.dataset.version || ''") != "",
                 "the dashboard's first update", 60)
        assert "stopped:" in text(driver, "summary")
        assert shown(driver, "leaderboard") and not shown(driver, "experiments") and not shown(driver, "journal")
        _keep(driver, "dashboard-overview.png", tmp_path)
        click_tab(driver, "charts")
        wait_for(lambda: shown(driver, "chart-main"), "the charts tab", 30)
        _assert_charts(driver, 3)
        assert clipped_titles(driver) == []
        assert not shown(driver, "leaderboard")
        _keep(driver, "dashboard-charts.png", tmp_path)
        click_tab(driver, "experiments")
        order = "return [...document.querySelectorAll('#experiments tr')].slice(1).map(r => r.cells[0].innerText)"
        header = driver.find_element("css selector", "#experiments th")
        header.click()
        assert driver.execute_script(order) == ["count-with-dict", "longest-word-one-pass"]
        header.click()
        assert driver.execute_script(order) == ["longest-word-one-pass", "count-with-dict"]
        # the next poll draws the table again, as when the lab changes: the sort holds
        driver.execute_script("version = ''; document.getElementById('experiments').dataset.html = ''")
        wait_for(lambda: driver.execute_script("return document.querySelector('#experiments th').dataset.dir || ''")
                 == "desc" and driver.execute_script(order)[0] == "longest-word-one-pass", "the sort to hold", 30)
        _keep(driver, "dashboard-experiments.png", tmp_path)
        click_tab(driver, "lineage")
        lineage = text(driver, "lineage")
        assert "By hypothesis" in lineage and "the lab's base" in lineage and "merge of count-with-dict" in lineage
        driver.find_element("css selector", "#lineage a[href='experiment/longest-word-one-pass']").click()
        wait_for(lambda: "Experiment longest-word-one-pass" in driver.find_element("tag name", "h1").text,
                 "the experiment page from the lineage", 30)
        assert console_errors(driver) == []
