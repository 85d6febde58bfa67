"""Fixtures for tests that run real agent CLIs against the scripted model endpoint."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.agents.endpoint import ScriptedEndpoint


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[Callable[[str | Path], ScriptedEndpoint]]:
    """Start a scripted endpoint for a script (a name under tests/agents/scripts/ or a path); stopped after."""
    started: list[ScriptedEndpoint] = []

    def start(script: str | Path) -> ScriptedEndpoint:
        server = ScriptedEndpoint.start(Path(script), tmp_path / f"endpoint-{len(started) + 1}.jsonl")
        started.append(server)
        return server

    yield start
    for server in reversed(started):
        server.stop()
