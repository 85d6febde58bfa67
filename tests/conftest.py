"""Shared fixtures: every test gets private cache, lock and results locations."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _private_state(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Calibration cache per test; one lock file per test session (real flock, not shared with the user)."""
    monkeypatch.setenv("ORCHARD_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    lock_dir = Path(os.environ.get("ORCHARD_TEST_LOCK_DIR", tmp_path_factory.getbasetemp()))
    monkeypatch.setenv("ORCHARD_LOCK_FILE", str(lock_dir / "orchard-test.lock"))
