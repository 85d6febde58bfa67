"""The lab's start calibrating beside its first workers: what measures waits for it, and its failure stops the lab."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

import pytest

from orchard.errors import OrchardError
from orchard.lab.loop.start import Anchoring


def _measure(log: list[str]) -> Any:
    def measure(ws: Any, baseline: Any, candidate: Any, *, progress: Any = None) -> str:
        log.append("measured")
        return "verdict"

    return measure


def test_a_verdict_waits_for_the_calibration_and_the_loop_sees_it_recorded_once() -> None:
    started: Future[bool] = Future()
    anchoring, log = Anchoring(started), list[str]()
    judge = threading.Thread(target=lambda: log.append(anchoring.measurer(_measure(log))(None, None, None)))
    judge.start()
    judge.join(timeout=0.3)
    assert judge.is_alive() and log == [] and not anchoring.check()  # calibrating: no verdict yet
    started.set_result(True)
    judge.join(timeout=60)
    assert log == ["measured", "verdict"]
    assert anchoring.check() and not anchoring.check()  # the notebook is drawn again once


def test_a_failed_calibration_measures_nothing_and_stops_the_loop() -> None:
    started: Future[bool] = Future()
    started.set_exception(OrchardError("A/A interval of report/wall_ms excludes zero"))
    anchoring, log = Anchoring(started), list[str]()
    with pytest.raises(OrchardError, match="excludes zero"):
        anchoring.measurer(_measure(log))(None, None, None)
    with pytest.raises(OrchardError, match="excludes zero"):
        anchoring.check()
    assert log == []
