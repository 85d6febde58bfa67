"""Fixtures for the lab's tests: real git repositories, workspaces, stand-in agent CLIs,
and a check that nothing a test started is left running."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import libtmux
import psutil
import pytest

from orchard.lab.state import LabState
from orchard.lab.workspace import Workspace, init_workspace

STANDIN = Path(__file__).with_name("standin.py")
AGENT_CLIS = {"claude": "claude", "codex": "codex", "cursor": "agent", "aider": "aider"}


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env=env).stdout


def make_repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "initial")
    return path


TARGET_FILES = {
    "README": "a target\n",
    "src/alpha.txt": "alpha 1\n",
    "src/beta.txt": "beta 1\n",
    "src/gamma.txt": "gamma 1\n",
    "tests/check.sh": "grep -q . src/alpha.txt\n",
}
BENCH_FILES = {"bench.py": "print('measuring')\n", ".gitignore": "results/\n"}


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
        return init_workspace(tmp_path / name, str(target_repo), str(bench_repo), config)

    return build


@pytest.fixture
def standin_bin(tmp_path: Path) -> tuple[Path, Path]:
    """A directory with the stand-in under every agent CLI's name, and its argv log."""
    bindir = tmp_path / "standin-bin"
    bindir.mkdir()
    for cli, executable in AGENT_CLIS.items():
        script = bindir / executable
        script.write_text(f'#!/bin/sh\nexec {sys.executable} {STANDIN} {cli} "$@"\n')
        script.chmod(0o755)
    return bindir, tmp_path / "standin-argv.jsonl"


@pytest.fixture
def mark() -> str:
    """A unique value put in every job's environment, to find its processes later."""
    return uuid.uuid4().hex


def processes_marked(mark: str, job: str | None = None) -> list[psutil.Process]:
    """Processes carrying the mark (and, if given, JOB=job) in their environment."""
    found = []
    for proc in psutil.process_iter():
        try:
            environ = proc.environ()
            if environ.get("ORCHARD_TEST_MARK") == mark and (job is None or environ.get("JOB") == job):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def wait_for(condition: Callable[[], bool], what: str, limit_s: float = 60.0) -> None:
    """Wait until `condition()` holds (a guard against hanging, not a timing claim)."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def assert_nothing_left(mark: str, socket_name: str | None) -> None:
    """No process carrying the test's mark, and no private tmux server."""
    left = [p for p in processes_marked(mark) if p.status() != psutil.STATUS_ZOMBIE]
    assert left == [], f"processes left running: {[(p.pid, p.cmdline()) for p in left]}"
    if socket_name is not None:
        assert not libtmux.Server(socket_name=socket_name).is_alive(), f"tmux server {socket_name} still up"


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
