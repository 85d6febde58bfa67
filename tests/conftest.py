"""Shared fixtures: every test gets private cache, lock and results locations."""

from __future__ import annotations

import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchard.cache import CACHE_ENV
from tests.bench.lanes_support import LaneEnv, assert_no_children
from tests.helpers import session_lock_file


def pytest_configure(config: pytest.Config) -> None:
    """Give the processes the tests start a Ctrl-C of their own, however the test run was started.

    A shell without job control starts a background command (`.ci/run &`, a CI runner's step) with
    SIGINT ignored, and an ignored signal stays ignored in every process started from it: the Ctrl-C
    tests could not interrupt what they test. A handler, unlike "ignored", is reset at exec.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(trylast=True)  # after `-m` deselected: only the tests that run count
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `--no-loadscope-reorder` (`make test-slow`), the files that declare the most time first: by the sum
    of their tests' timeouts, each file's tests kept together and in order.

    `--dist loadfile` hands a worker the next file when it is done with one. xdist's own order is by number of
    tests, so a file of one long test (the PyPI red-team battery, ~14 minutes) came among the last and the other
    worker sat idle while it ended; longest first, the tier ends on short files, both workers busy.
    """
    if config.getoption("loadscopereorder", True):
        return
    default = float(config.getini("timeout") or 0)
    declared: dict[Path, float] = {}
    for item in items:
        marker = item.get_closest_marker("timeout")
        seconds = float(marker.args[0]) if marker is not None and marker.args else default
        declared[item.path] = declared.get(item.path, 0.0) + seconds
    items.sort(key=lambda item: -declared[item.path])  # stable: a file's tests keep their order


@pytest.fixture(scope="module", autouse=True)
def _private_module_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One lock file for the test run (a real flock, not the user's machine-wide one) and a cache of the module's
    own, set before the module's fixtures are made: they read and wrote the user's ~/.cache/orchard (a calibration
    one test run made at its load decided the labs of the next run on the machine, a CI's included) and measured
    under the machine-wide lock."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(tmp_path_factory.mktemp("module-cache")))
        patch.setenv("ORCHARD_LOCK_FILE", str(session_lock_file(tmp_path_factory)))
        yield


@pytest.fixture(autouse=True)
def _private_state(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A calibration cache per test (the lock is the module's, above)."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def lane_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LaneEnv]:
    """Private lock file, private temp dir; asserts no child process outlives the test."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("ORCHARD_LOCK_FILE", str(tmp_path / "bench.lock"))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.delenv("GIT_BENCH_REMOTE", raising=False)
    monkeypatch.delenv("OAK_BENCH_SYNC_REPO", raising=False)
    env = LaneEnv(tmp_path / "results", temp, tmp_path / "bin")
    yield env
    assert_no_children()
