"""The real agent CLIs the tests run, as `.ci/agents` (`make agents`) installed them into `.agents/`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.agents.endpoint import ROOT

AGENTS = ROOT / ".agents"
NPM_BIN = AGENTS / "node_modules" / ".bin"
CLAUDE_VERSION = "2.1.332"  # pinned in .ci/agents

# What a CLI run against the scripted endpoint must not do on its own: update itself, send telemetry or
# error reports, fetch release notes (CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC covers all of these).
CLAUDE_QUIET = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}


def installed(name: str, command: str, directory: Path = NPM_BIN) -> Path:
    """The CLI's executable under .agents/, or skip the test with the reason .ci/agents recorded."""
    path = directory / command
    if os.access(path, os.X_OK):
        return path
    reason = AGENTS / f"{name}.unavailable"
    why = reason.read_text().strip() if reason.is_file() else "`make agents` (.ci/agents) has not been run"
    pytest.skip(f"the real {name} CLI is not installed in {AGENTS}: {why}")


def claude() -> Path:
    return installed("claude", "claude")


def codex() -> Path:
    return installed("codex", "codex")


def aider() -> Path:
    """aider: a PyPI CLI, in its own virtualenv, linked from .agents/bin/."""
    return installed("aider", "aider", AGENTS / "bin")
