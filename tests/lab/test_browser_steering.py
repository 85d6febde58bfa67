"""The dashboard's controls and its lineage graph in a real headless Chromium (issue 34, items 2 and 6).

A person clicks pause, resume and stop on the page the printed address opened (its token in a cookie): each
is journaled with who asked; the same clicks on the page opened without the token change nothing and say
why. The lineage of fifty experiments is drawn as one graph whose nodes are all there and whose labels do
not overlap; its screenshot is docs/dashboard-lineage.png (with ORCHARD_SCREENSHOTS=docs).
"""

from __future__ import annotations

import getpass
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchard.lab.db.state import LabState
from orchard.lab.notebook import files as records
from orchard.lab.records.lab_start import LabStart
from orchard.lab.records.land_steps import MainChecked, Merged
from orchard.lab.records.steering_events import Paused, Resumed, StopAsked
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.browser import chromium, click_tab, clipped_titles, console_errors, needs_chromium, text
from tests.lab.lab_helpers import wait_for
from tests.lab.lineage_support import fill_lineage
from tests.lab.loop_support import verdict_of
from tests.lab.serve_support import Server, serving, wait_until_served
from tests.lab.test_charts_report import _exact as exact
from tests.lab.test_charts_report import lab  # noqa: F401  (what pages_lab adds to)
from tests.lab.test_experiment_page import pages_lab  # noqa: F401  (the hand-filled lab: a LAND with its patch)
from tests.lab.test_state_records import BASE, BENCH

pytestmark = [needs_chromium, pytest.mark.slow]

COUNT = 50


@pytest.fixture(autouse=True)
def _idle_machine(_private_state: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCHARD_LOCK_FILE", str(tmp_path / "idle-machine.lock"))


@pytest.fixture
def fifty(make_workspace: Any) -> Workspace:
    """Fifty experiments, the last one's worker at work."""
    ws = make_workspace()
    state = LabState.open(ws.root)
    try:
        fill_lineage(state, COUNT)
    finally:
        state.close()
    return ws


@pytest.fixture
def server(fifty: Workspace) -> Iterator[Server]:
    with serving(fifty.root) as served:
        wait_until_served(served)
        yield served


def _journal(ws: Workspace) -> list[tuple[str, str | None, str]]:
    """(what, experiment, who asked) of every steering request, oldest first."""
    state = LabState.open_readonly(ws.root)
    try:
        found = [(e.id, type(e.event).__name__, e.experiment, e.event.by)
                 for kind in (Paused, Resumed, StopAsked) for e in state.events_of(kind)]
    finally:
        state.close()
    return [(what, experiment, by) for _, what, experiment, by in sorted(found)]


def _opened(driver: Any, url: str) -> None:
    driver.get(url)
    wait_for(lambda: driver.execute_script("return document.body.dataset.version || ''") != "",
             "the dashboard's first update", 60)


def _click(driver: Any, steer: str, answer: str) -> str:
    """Click the control that POSTs to `steer`; the answer the page shows once it contains `answer`."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    def press() -> bool:
        """False while the button is not there yet, or the page's poll just drew its section again."""
        try:
            driver.find_element("css selector", f"button[data-steer='{steer}']").click()
        except (NoSuchElementException, StaleElementReferenceException):
            return False
        return True

    driver.execute_script("document.getElementById('steered').textContent = ''")  # no earlier answer counts
    wait_for(press, f"the {steer} button", 60)
    wait_for(lambda: answer in text(driver, "steered"), f"the answer to {steer}", 60)
    return text(driver, "steered")


def test_pause_resume_and_stop_from_the_dashboard_are_journaled_with_who_asked(fifty: Workspace, server: Server,
                                                                               tmp_path: Path) -> None:
    by = f"{getpass.getuser()} via the dashboard from 127.0.0.1"
    running = f"e{COUNT - 1:02d}"
    with chromium(tmp_path / "profile", height=1000) as driver:
        _opened(driver, server.url)  # the printed address: its token becomes the page's cookie
        # issue 34 item 6: in UTC, as every other time on the page (it was the browser's local 12-hour time)
        live = text(driver, "live")
        assert re.search(r"(updated|unchanged) at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", live), live
        said = _click(driver, "api/pause", "paused by")
        assert f"paused by {by}: no new workers (1 at work finish and are judged)" in said
        wait_for(lambda: f"paused by {by}" in text(driver, "summary"), "the pause in the summary", 60)
        said = _click(driver, "api/resume", "resumed by")
        assert f"resumed by {by}" in said
        wait_for(lambda: "paused by" not in text(driver, "summary"), "the resume in the summary", 60)
        name = next(n for n in text(driver, "workers").split() if n.startswith(running))
        said = _click(driver, f"api/stop/{name}?kill=1", "stop asked")
        assert f"{name}: stop asked by {by}" in said and "KILLed" in said
        assert console_errors(driver) == []
    assert _journal(fifty) == [("Paused", None, by), ("Resumed", None, by), ("StopAsked", name, by)]


def test_without_the_token_the_dashboard_shows_but_changes_nothing(fifty: Workspace, server: Server,
                                                                   tmp_path: Path) -> None:
    with chromium(tmp_path / "profile", height=1000) as driver:
        _opened(driver, server.base)  # loopback: reading needs no token, steering does
        said = _click(driver, "api/pause", "401")
        assert "steering the lab needs the token" in said
        assert driver.find_element("id", "steered").get_attribute("class") == "down"
        workers = text(driver, "workers")
        name = next(n for n in workers.split() if n.startswith(f"e{COUNT - 1:02d}"))
        assert "401" in _click(driver, f"api/stop/{name}", "401")
        assert "paused by" not in text(driver, "summary")
    assert _journal(fifty) == []


def test_the_lineage_graph_of_fifty_experiments_is_drawn_readable(fifty: Workspace, server: Server,
                                                                  tmp_path: Path) -> None:
    with chromium(tmp_path / "profile", height=2400) as driver:  # the whole graph on screen, for its screenshot
        _opened(driver, server.url)
        click_tab(driver, "lineage")
        graph = driver.find_element("css selector", "#lineage svg")
        drawn = driver.execute_script("""
            const svg = document.querySelector('#lineage svg'), box = e => e.getBoundingClientRect();
            const labels = [...svg.querySelectorAll('g.node text')].map(box);
            const texts = [...svg.querySelectorAll('text')].map(box);
            let overlaps = 0;
            for (let i = 0; i < labels.length; i++) for (let j = i + 1; j < labels.length; j++) {
              const a = labels[i], b = labels[j];
              if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) overlaps++;
            }
            const frame = box(svg);
            return {nodes: [...svg.querySelectorAll('g.node')].map(g => g.dataset.experiment),
                    shown: [...svg.querySelectorAll('g.node circle')].filter(c => box(c).width > 0).length,
                    iterate: svg.querySelectorAll('path.edge.iterate').length,
                    merge: svg.querySelectorAll('path.edge.merge').length,
                    overlaps, width: frame.width, height: frame.height,
                    outside: texts.filter(l => l.right > frame.right + 1 || l.left < frame.left - 1).length};""")
        assert len(drawn["nodes"]) == COUNT and drawn["shown"] == COUNT and drawn["nodes"][0].startswith("e00-")
        assert drawn["iterate"] == 20 and drawn["merge"] == 15
        assert drawn["overlaps"] == 0 and drawn["outside"] == 0, drawn
        assert drawn["width"] > 300 and drawn["height"] > COUNT * 20, drawn
        shot = tmp_path / "dashboard-lineage.png"
        graph.screenshot(str(shot))
        png = shot.read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 20_000, "a picture with something drawn in it"
        keep = os.environ.get("ORCHARD_SCREENSHOTS")
        if keep:
            (Path(keep) / shot.name).write_bytes(png)
        # a node is a link to its experiment's page
        driver.find_element("css selector", f"#lineage svg g.node[data-experiment='{drawn['nodes'][2]}'] a").click()
        wait_for(lambda: f"Experiment {drawn['nodes'][2]}" in driver.find_element("tag name", "h1").text,
                 "the experiment page from the graph", 30)
        assert console_errors(driver) == []


def test_the_diff_is_read_at_the_size_of_the_rest_of_the_page(pages_lab: Workspace, tmp_path: Path) -> None:  # noqa: F811
    # issue 34 item 6: the diff's code was drawn at 9.4 px (its table's .85em, then <pre>'s .85em of monospace)
    with serving(pages_lab.root) as served, chromium(tmp_path / "profile", height=1000) as driver:
        wait_until_served(served)
        driver.get(served.url.replace("/?", "/experiment/count-with-dict?"))
        click_tab(driver, "diff")
        sizes = driver.execute_script("""
            const px = s => parseFloat(getComputedStyle(document.querySelector(s)).fontSize);
            return {code: px('#tab-diff tr.add pre'), text: px('#facts')};""")
        assert sizes["code"] >= 12 and sizes["code"] >= 0.8 * sizes["text"], sizes
        assert console_errors(driver) == []


def test_no_point_label_is_cut_off_at_the_edge_of_its_plot(lab: Workspace, tmp_path: Path) -> None:  # noqa: F811
    # issue 34 item 6: the label over a chart's highest point was clipped at the top of the plot
    with chromium(tmp_path / "profile", offline=True) as driver:
        driver.get((lab.root / "report.html").as_uri())
        click_tab(driver, "charts")
        wait_for(lambda: driver.execute_script("return document.querySelectorAll('.chart .main-svg').length") > 0,
                 "report.html to draw its charts", 60)
        cut = driver.execute_script("""
            const box = e => e.getBoundingClientRect(), found = [];
            for (const c of document.querySelectorAll('.chart')) {
              const svg = c.querySelector('.main-svg'), area = c.querySelector('.nsewdrag');
              if (!svg || !area) continue;
              const frame = box(svg), plot = box(area);
              for (const t of c.querySelectorAll('.textpoint text')) {
                const r = box(t);
                const inside = (f) => r.left >= f.left - 1 && r.right <= f.right + 1 && r.top >= f.top - 1
                                      && r.bottom <= f.bottom + 1;
                const clipped = t.closest('[clip-path]') !== null;
                if (!inside(frame) || (clipped && !inside(plot))) found.push(c.id + ': ' + t.textContent);
              }
            }
            return found;""")
        labels = driver.execute_script("return document.querySelectorAll('.chart .textpoint text').length")
        assert labels > 0 and cut == [], cut
        assert clipped_titles(driver) == []
        driver.save_screenshot(str(tmp_path / "report-charts.png"))


def test_a_byte_axis_is_ticked_in_whole_bytes(make_workspace: Any, tmp_path: Path) -> None:
    # issue 34 item 6: main's output of 1,121 then 1,122 bytes was ticked 1,121.2, 1,121.4 ...: no byte is split
    ws = make_workspace()
    state = LabState.open(ws.root)
    try:
        state.set_meta("metric_directions", json.dumps({"report/stdout_bytes": "lower"}))
        state.log(LabStart(BASE, BENCH, "", "20 A/A pairs, seed 11", {"report/stdout_bytes": 1121.0},
                           {"report/stdout_bytes": 0.0}))
        for i, (before, after) in enumerate(((1121.0, 1122.0), (1122.0, 1121.0), (1121.0, 1123.0))):
            commit = f"{i + 1:02x}" * 20
            state.log(Merged(f"lab/win-{i}", "main", commit, BASE), f"win-{i}")
            state.log(MainChecked(verdict_of([exact("report/stdout_bytes", before, after)]), False), f"win-{i}")
        records.write_notebook(ws, state, final=True)
    finally:
        state.close()
    with chromium(tmp_path / "profile", offline=True) as driver:
        driver.get((ws.root / "report.html").as_uri())
        click_tab(driver, "charts")
        wait_for(lambda: driver.execute_script("return document.querySelectorAll('.chart .main-svg').length") > 0,
                 "report.html to draw its charts", 60)
        ticks = driver.execute_script("return [...document.querySelectorAll('#main-report-stdout-bytes .ytick text')]"
                                      ".map(t => t.textContent)")
        assert ticks and all(re.fullmatch(r"\d{1,3}(,\d{3})*", t) for t in ticks), ticks
        assert len(set(ticks)) == len(ticks), ticks
