"""Fixtures for tests that run real agent CLIs against the scripted model endpoint."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.agents.endpoint import ScriptedEndpoint
from tests.agents.endpoint.script import VALUE_PREFIX


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[Callable[..., ScriptedEndpoint]]:
    """Start a scripted endpoint for a script (a name under tests/agents/scripts/ or a path), with `values` its
    replies may name (`${name}`); stopped after."""
    started: list[ScriptedEndpoint] = []

    def start(script: str | Path, **values: str) -> ScriptedEndpoint:
        env = {f"{VALUE_PREFIX}{name}": value for name, value in values.items()}
        server = ScriptedEndpoint.start(Path(script), tmp_path / f"endpoint-{len(started) + 1}.jsonl", env)
        started.append(server)
        return server

    yield start
    for server in reversed(started):
        server.stop()
