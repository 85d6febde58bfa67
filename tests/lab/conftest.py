"""Fixtures for the lab's tests (helpers live in lab_helpers.py)."""

from __future__ import annotations

import shutil
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import libtmux
import pytest

from orchard.lab.db.state import LabState
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.lab.workers.workspace.workspace_init import init_workspace
from tests.lab.lab_helpers import AGENT_CLIS, BENCH_FILES, CLI_HELP, STANDIN, TARGET_FILES, make_repo


@pytest.fixture
def target_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "target-repo", TARGET_FILES)


@pytest.fixture
def bench_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "bench-repo", BENCH_FILES)


@pytest.fixture
def make_workspace(tmp_path: Path, target_repo: Path, bench_repo: Path) -> Callable[..., Workspace]:
    """A workspace for the target and bench repos, configured by TOML text."""

    def build(config_text: str = "", *, name: str = "ws") -> Workspace:
        config = tmp_path / f"{name}.toml"
        config.write_text(config_text)
        return init_workspace(tmp_path / name, str(target_repo), str(bench_repo), config if config_text else None)

    return build


@pytest.fixture
def standin_bin(tmp_path: Path) -> Path:
    """A directory with the stand-in under every agent CLI's name (it records its calls in the worker's log)."""
    bindir = tmp_path / "standin-bin"
    bindir.mkdir()
    # a copy beside them: the sandbox shows a worker its PATH, not this repository (which may be hidden)
    shutil.copyfile(STANDIN, bindir / STANDIN.name)
    shutil.copytree(CLI_HELP, bindir / "cli-help")  # the real CLIs' recorded answers it replays
    for cli, executable in AGENT_CLIS.items():
        script = bindir / executable
        script.write_text(f'#!/bin/sh\nexec {sys.executable} {bindir / STANDIN.name} {cli} "$@"\n')
        script.chmod(0o755)
    return bindir


@pytest.fixture
def mark() -> str:
    """A unique value put in every job's environment, to find its processes later."""
    return uuid.uuid4().hex


@pytest.fixture
def socket_name() -> Iterator[str]:
    """A private tmux socket for tests that start executors directly; killed if a test fails."""
    name = f"orchard-test-{uuid.uuid4().hex[:8]}"
    yield name
    server = libtmux.Server(socket_name=name)
    if server.is_alive():
        server.cmd("kill-server")


@pytest.fixture
def lab_state(tmp_path: Path) -> Iterator[LabState]:
    """A fresh lab.db on its own (no workspace around it)."""
    state = LabState(tmp_path / "lab.db")
    yield state
    state.close()
