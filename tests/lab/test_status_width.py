"""`orchard status` at 80 columns: every experiment, worker, log and metric name whole, never cut to `dict-ide…`
(issue 33 item 6); a wide terminal still gets the tables."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
from rich.console import Console

from orchard.bench.deciding.verdict import Direction
from orchard.lab.db.state import LabState
from orchard.lab.judge.verdict_view import MetricEffect
from orchard.lab.notebook import status, view
from orchard.lab.notebook.leaderboard import LeaderRow
from orchard.lab.notebook.view import LabView, WorkerView
from orchard.lab.workers.workspace.workspace import Workspace

EXPERIMENT = "dict-identity-counting-with-a-long-name"
LOG = "/tmp/a-lab-somewhere/logs/dict-identity-counting-with-a-long-name.log"
METRIC = "render-large-table/peak_rss_bytes"


def _lab(make_workspace: Callable[..., Workspace]) -> LabView:
    """A lab with a running worker and a leaderboard row whose names are long, as real ones are."""
    ws = make_workspace()
    state = LabState.open(ws.root)
    try:
        lab = view.build(ws, state, live=False)
    finally:
        state.close()
    worker = WorkerView(EXPERIMENT, EXPERIMENT, "w1", "exploit", "patch", "running", 75.0, "local", LOG, ())
    effect = MetricEffect(METRIC, "improved", -0.4652, -0.48, -0.45, 0.03, 12, 0.04, 232_087.0, 124_100.0, False)
    row = LeaderRow(METRIC, Direction.LOWER, 232_087.0, 124_100.0, EXPERIMENT, "4b22c96057", 124_100.0, effect, None)
    return dataclasses.replace(lab, workers=(worker,), leaderboard=(row,))


def _shown(lab: LabView, width: int) -> str:
    console = Console(record=True, width=width, color_system=None)
    console.print(status.render(lab))
    return console.export_text()


def test_status_fits_80_columns_with_every_name_whole(make_workspace: Callable[..., Workspace]) -> None:
    text = _shown(_lab(make_workspace), 80)
    assert max(len(line) for line in text.splitlines()) <= 80, text
    assert "…" not in text, text
    for name in (EXPERIMENT, LOG, METRIC, "running", "exploit", "232.1 KB", "-46.52%"):
        assert name in text, (name, text)


@pytest.mark.parametrize("width", [200])
def test_a_wide_terminal_gets_the_status_tables(make_workspace: Callable[..., Workspace], width: int) -> None:
    text = _shown(_lab(make_workspace), width)
    header = next(line for line in text.splitlines() if "experiment" in line and "worker" in line)
    assert header.replace("┃", " ").split() == ["experiment", "worker", "lane", "launcher", "status", "minutes",
                                                "host", "log"]
    assert EXPERIMENT in text and METRIC in text, text
