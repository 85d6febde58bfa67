"""Shared-baseline campaigns in a whole lab: candidates built while the lab calibrates wait on the same base and
are measured in one campaign (one baseline run a round for all of them), each with its own verdict; the decisions
are those of a lab that measures each candidate alone (`shared_baseline = 1`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchard.demo.make import make_demo
from orchard.lab.config import orchard_toml as config_module
from orchard.lab.config import rendered as config_file
from orchard.lab.config.sections import ExecutorKind
from orchard.lab.records.db import JournalEvent
from orchard.lab.records.judgment import JudgmentEntry
from tests.lab.lab_helpers import lab_events as events
from tests.lab.test_dask import assert_same_decisions, decisions, finish, orchard

# two wins and a change the absolute gates refuse, all measured: their ready patches are built in seconds, while
# the lab's A/A calibration takes longer, so all three wait for their verdicts together
HYPOTHESES = ["terse-report", "count-with-dict", "top-ten-default"]


def _lab(root: Path, shared: int) -> Path:
    ws = make_demo(root, workers=len(HYPOTHESES), only=HYPOTHESES, executor=ExecutorKind.SUBPROCESS)
    config = config_module.load(ws.config_path)
    config_file.write(config.replace("workers", shared_baseline=shared, judges=len(HYPOTHESES)), ws.config_path)
    return ws.root


def _shared(root: Path) -> list[JournalEvent[JudgmentEntry]]:
    """The journaled judgments whose verdict was measured beside other candidates (a win judged again after
    another landed is measured alone: every judgment counts, not only the last)."""
    return [e for e in events(root, JudgmentEntry) if e.event.verdict is not None
            and any("on shared baseline runs" in reason for reason in e.event.verdict.reasons)]


@pytest.mark.slow
@pytest.mark.timeout(1500)  # measurements on a shared machine; the lab's own waits are bounded
def test_candidates_on_one_base_share_a_campaign_and_decide_as_alone(tmp_path: Path, mark: str) -> None:
    shared, alone = _lab(tmp_path / "shared", 4), _lab(tmp_path / "alone", 1)
    output = finish(orchard("run", str(shared), mark=mark), timeout=1400)
    finish(orchard("run", str(alone), mark=mark), timeout=1400)
    beside = {e.experiment for e in _shared(shared)}
    assert len(beside) >= 2, output  # at least two measured in one campaign, each verdict saying so
    assert not _shared(alone)
    assert_same_decisions(decisions(alone), decisions(shared))
    assert decisions(shared)["terse-report"][0] == "LAND", output
