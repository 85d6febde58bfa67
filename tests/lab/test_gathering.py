"""The judge threads' meeting point: candidates waiting on one base while a campaign runs share the next one."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from orchard.lab.judge import gathering
from orchard.lab.judge.gathering import Gathering


def _built(name: str) -> Any:
    return SimpleNamespace(path=Path(f"/built/{name}"))


def _ws(verdict: str = "") -> Any:
    return SimpleNamespace(config=SimpleNamespace(bench=SimpleNamespace(verdict=verdict)))


@pytest.fixture
def campaigns(monkeypatch: pytest.MonkeyPatch) -> tuple[list[list[str]], threading.Event]:
    """Every campaign the gathering runs, as the candidates it measured; the first (alone) waits for `release`."""
    ran: list[list[str]] = []
    release = threading.Event()

    def alone(ws: Any, baseline: Any, candidate: Any, progress: Any = None) -> str:
        ran.append([candidate.path.name])
        if len(ran) == 1:
            assert release.wait(10)
        return f"verdict of {candidate.path.name}"

    def together(ws: Any, baseline: Any, candidates: list[Any], unchanged: Any, progress: Any = None) -> tuple:
        ran.append([c.path.name for c in candidates])
        return tuple(f"verdict of {c.path.name} beside {len(candidates) - 1}" for c in candidates)

    monkeypatch.setattr(gathering, "measure", alone)
    monkeypatch.setattr(gathering, "measure_together", together)
    monkeypatch.setattr(gathering, "check_built", lambda *_: None)
    return ran, release


def _wait_until(condition: Any) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_candidates_waiting_on_one_base_share_the_next_campaign(campaigns: tuple[list, threading.Event]) -> None:
    ran, release = campaigns
    gathered = Gathering(4)
    base = _built("base")
    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(gathered.measure, _ws(), base, _built("a"))
        _wait_until(lambda: ran)  # a is measured alone: nobody else was waiting
        later = [pool.submit(gathered.measure, _ws(), base, _built(name)) for name in ("b", "c", "d")]
        _wait_until(lambda: gathered.jobs(2) == 2 + 3)  # a, b, c, d in the gathering: no build slot held
        release.set()
        assert first.result() == "verdict of a"
        results = [f.result() for f in later]
    assert ran[0] == ["a"] and sorted(ran[1]) == ["b", "c", "d"] and len(ran) == 2
    assert sorted(results) == ["verdict of b beside 2", "verdict of c beside 2", "verdict of d beside 2"]
    assert gathered.jobs(2) == 2


def test_one_candidate_or_a_verdict_command_is_measured_alone(campaigns: tuple[list, threading.Event]) -> None:
    ran, release = campaigns
    release.set()
    assert Gathering(4).measure(_ws(), _built("base"), _built("a")) == "verdict of a"
    assert Gathering(1).jobs(2) == Gathering(1).jobs(2, most=True) == 2  # shared_baseline = 1: as before
    with ThreadPoolExecutor(2) as pool:  # the bench's own verdict command judges one pair: never shared
        futures = [pool.submit(Gathering(4).measure, _ws("sleep 0"), _built("base"), _built(n)) for n in "xy"]
        assert [f.result() for f in futures] == ["verdict of x", "verdict of y"]
    assert ran == [["a"], ["x"], ["y"]] or ran == [["a"], ["y"], ["x"]]
