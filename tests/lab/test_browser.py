"""The dashboard and report.html in a real headless Chromium: they load, follow a running lab without a
reload, draw charts with axes and labels, refuse anonymous readers off loopback, and report.html needs no
network. Screenshots go to the test's temp dir."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchard.demo.make import make_demo
from orchard.lab.workers.workspace import Workspace
from tests.lab.browser import (
    chart_axes,
    chromium,
    console_errors,
    needs_chromium,
    screenshot,
    text,
)
from tests.lab.lab_helpers import assert_nothing_left, wait_for
from tests.lab.serve_support import serving, wait_until_served
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
        by_id = {c["id"]: c for c in charts}
        assert by_id["main-report-wall-ms"]["x"] == "time (UTC)"
        assert "change vs lab start (%)" in by_id["main-report-wall-ms"]["y"]
        assert {"11502", "560"} <= set(by_id["main-report-stdout-bytes"]["labels"]), "exact values, labelled"
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
