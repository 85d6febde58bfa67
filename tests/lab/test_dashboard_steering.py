"""The dashboard steers a lab (issue 34, item 2) and draws its lineage (item 6), fast and without a browser
(test_browser_steering.py clicks the same controls and looks at the same graph in Chromium).

On main the dashboard was read-only: POST /api/pause was 405, so a lab could be steered only from the command
line, and the lineage was two nested lists, no picture.
"""

from __future__ import annotations

import getpass
import json
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from orchard.demo.make import make_demo
from orchard.lab.db.state import LabState
from orchard.lab.notebook import pages
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import Lane
from orchard.lab.records.steering_events import Paused, Resumed, StopAsked
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.lab_helpers import wait_for
from tests.lab.lineage_support import fill_lineage
from tests.lab.serve_support import Server, fetch, serving, wait_until_served
from tests.lab.test_charts_report import _snapshot
from tests.lab.test_state_records import BASE, BENCH

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(autouse=True)
def _idle_machine(_private_state: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCHARD_LOCK_FILE", str(tmp_path / "idle-machine.lock"))


@pytest.fixture
def demo(tmp_path: Path) -> Workspace:
    """The demo lab, not started, with one experiment at work (as a running lab would have it)."""
    ws = make_demo(tmp_path / "demo", only=["count-with-dict", "terse-report"])
    state = LabState.open(ws.root)
    try:
        state.add_experiment("terse-report", "terse-report", "w1", Lane.EXPLOIT, 1, BASE, BENCH,
                             ExperimentStatus.RUNNING)
    finally:
        state.close()
    return ws


def post(server: Server, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(server.base + path, data=b"", method="POST", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _sections(server: Server) -> dict[str, str]:
    sections: dict[str, str] = json.loads(fetch(server.base + "api/page")[1])["sections"]
    return sections


def _journal(ws: Workspace) -> dict[str, list[Any]]:
    state = LabState.open_readonly(ws.root)
    try:
        return {kind.__name__: [(e.experiment, e.event) for e in state.events_of(kind)]
                for kind in (Paused, Resumed, StopAsked)}
    finally:
        state.close()


def test_the_controls_change_nothing_without_the_token_even_on_loopback(demo: Workspace) -> None:
    with serving(demo.root) as server:
        wait_until_served(server)
        assert server.token and server.url.startswith("http://127.0.0.1:")
        assert fetch(server.base + "api/page")[0] == 200, "reading on loopback needs no token"
        for path in ("api/pause", "api/resume", "api/stop/terse-report"):
            status, said = post(server, path)
            assert status == 401 and "steering the lab needs the token" in said, path
            assert post(server, path + "?token=" + server.token)[0] == 401, "a POST takes no token in its address"
            assert post(server, path, {"Cookie": "orchard_token=wrong"})[0] == 401
        assert fetch(server.base + "api/pause")[0] == 405, "a GET never changes the lab"
        # another site's page, even one that somehow holds the token, is refused
        stolen = {"Authorization": f"Bearer {server.token}", "Origin": "http://evil.example"}
        status, said = post(server, "api/pause", stolen)
        assert status == 403 and "own page" in said
        assert post(server, "api/pause", {"Authorization": f"Bearer {server.token}",
                                          "Sec-Fetch-Site": "cross-site"})[0] == 403
    assert _journal(demo) == {"Paused": [], "Resumed": [], "StopAsked": []}


def test_the_controls_with_the_token_journal_who_asked_as_the_command_line_does(demo: Workspace) -> None:
    by = f"{getpass.getuser()} via the dashboard from 127.0.0.1"
    with serving(demo.root) as server:
        wait_until_served(server)
        token = {"Authorization": f"Bearer {server.token}"}
        status, said = post(server, "api/pause", {**token, "Origin": server.base.rstrip("/")})
        assert status == 200 and f"paused by {by}: no new workers (1 at work" in said, said
        assert "already paused" in post(server, "api/pause", token)[1]
        wait_for(lambda: f"paused by {by}" in _sections(server)["summary"], "the pause on the page", 60)
        sections = _sections(server)
        assert "data-steer='api/resume'" in sections["summary"] and "data-steer='api/pause'" not in sections["summary"]
        assert "data-steer='api/stop/terse-report?kill=1'" in sections["workers"]
        status, said = post(server, "api/stop/terse-report?kill=1", token)
        assert status == 200 and f"terse-report: stop asked by {by}, its hypothesis terse-report KILLed" in said
        status, said = post(server, "api/stop/no-such-experiment", token)
        assert status == 400 and "no-such-experiment: no such experiment" in said
        status, said = post(server, "api/resume", token)
        assert status == 200 and f"resumed by {by}" in said
        status, said = post(server, "api/resume", token)
        assert status == 400 and "is not paused: nothing to resume" in said
    journal = _journal(demo)
    assert [e.by for _, e in journal["Paused"]] == [by] and [e.by for _, e in journal["Resumed"]] == [by]
    assert journal["StopAsked"] == [("terse-report", StopAsked(False, by))]
    assert server.process.returncode == 0, server.output


def test_the_report_shows_a_pause_but_no_controls(demo: Workspace) -> None:
    state = LabState.open(demo.root)
    try:
        state.log(Paused("ana"))
    finally:
        state.close()
    report = pages.build_page(_snapshot(demo), live=False)
    assert "paused by ana" in report.sections["summary"]
    assert "data-steer" not in "".join(report.sections.values())


def test_the_lineage_graph_draws_every_experiment_its_iterate_children_and_merges(
        make_workspace: Any) -> None:
    ws = make_workspace()
    state = LabState.open(ws.root)
    try:
        names = fill_lineage(state, 50)
    finally:
        state.close()
    section = pages.build_page(_snapshot(ws), live=True).sections["lineage"]
    svg = ET.fromstring(section[section.index("<svg"):section.index("</svg>") + 6])
    nodes = svg.findall(f".//{SVG}g[@class='node']")
    assert [n.get("data-experiment") for n in nodes] == names
    links = [n.find(f"{SVG}a") for n in nodes]
    assert [a.get("href") for a in links if a is not None] == [f"experiment/{name}" for name in names]
    # one row each: no two experiments (or their labels) share a height
    heights = [float(c.get("cy", "")) for n in nodes if (c := n.find(f".//{SVG}circle")) is not None]
    assert len(set(heights)) == 50 and heights == sorted(heights)
    iterates = [(p.get("data-from"), p.get("data-to")) for p in svg.findall(f".//{SVG}path[@class='edge iterate']")]
    assert ("e00-count-with-dict-0", "e01-count-with-dict-0-r1") in iterates
    assert ("e01-count-with-dict-0-r1", "e02-count-with-dict-0-r2") in iterates
    assert len(iterates) == 20, "two ITERATE children in every five experiments"
    merges = [p.get("data-from") for p in svg.findall(f".//{SVG}path[@class='edge merge']")]
    assert merges[:2] == ["e02-count-with-dict-0-r2", "e04-count-with-dict-0-alt4"] and len(merges) == 15
    commits = [g.get("data-commit") for g in svg.findall(f".//{SVG}g[@class='commit']")]
    assert commits[0] == BASE and len(commits) == 16
    assert "e49-" in names[-1] and "running" in "".join(nodes[-1].itertext())


def test_no_graph_before_the_first_experiment(make_workspace: Any) -> None:
    ws = make_workspace()
    LabState.open(ws.root).close()
    section = pages.build_page(_snapshot(ws), live=True).sections["lineage"]
    assert "<svg" not in section and "no experiment yet" in section
