"""The dashboard's controls and its lineage graph in a real headless Chromium (issue 34, items 2 and 6).

A person clicks pause, resume and stop on the page the printed address opened (its token in a cookie): each
is journaled with who asked; the same clicks on the page opened without the token change nothing and say
why. The lineage of fifty experiments is drawn as one graph whose nodes are all there and whose labels do
not overlap; its screenshot is docs/dashboard-lineage.png (with ORCHARD_SCREENSHOTS=docs).
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchard.lab.db.state import LabState
from orchard.lab.records.steering_events import Paused, Resumed, StopAsked
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.browser import chromium, click_tab, console_errors, needs_chromium, text
from tests.lab.lab_helpers import wait_for
from tests.lab.lineage_support import fill_lineage
from tests.lab.serve_support import Server, serving, wait_until_served
from tests.lab.test_charts_report import lab  # noqa: F401  (what pages_lab adds to)
from tests.lab.test_experiment_page import pages_lab  # noqa: F401  (the hand-filled lab: a LAND with its patch)

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
    wait_for(lambda: bool(driver.find_elements("css selector", f"button[data-steer='{steer}']")),
             f"the {steer} button", 60)
    driver.find_element("css selector", f"button[data-steer='{steer}']").click()
    wait_for(lambda: answer in text(driver, "steered"), f"the answer to {steer}", 60)
    return text(driver, "steered")


def test_pause_resume_and_stop_from_the_dashboard_are_journaled_with_who_asked(fifty: Workspace, server: Server,
                                                                               tmp_path: Path) -> None:
    by = f"{getpass.getuser()} via the dashboard from 127.0.0.1"
    running = f"e{COUNT - 1:02d}"
    with chromium(tmp_path / "profile", height=1000) as driver:
        _opened(driver, server.url)  # the printed address: its token becomes the page's cookie
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
