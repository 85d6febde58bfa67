"""The real agent CLIs the tests run, as `.ci/agents` (`make agents`) installed them into `.agents/`."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.agents.endpoint import ROOT

AGENTS = ROOT / ".agents"
NPM_BIN = AGENTS / "node_modules" / ".bin"
INSTALLER = ROOT / ".ci" / "agents"  # where the versions are pinned

# What a CLI run against the scripted endpoint must not do on its own: update itself, send telemetry or
# error reports, fetch release notes (CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC covers all of these).
CLAUDE_QUIET = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}


def pinned(package: str) -> str:
    """The version .ci/agents installs of a package (npm `package@version`, PyPI `package==version`)."""
    found = re.search(re.escape(package) + r"(?:@|==)([0-9][^\s\"]*)", INSTALLER.read_text())
    assert found is not None, f"{package} is not pinned in {INSTALLER}"
    return found.group(1)


def installed(name: str, command: str, package: str, directory: Path = NPM_BIN) -> Path:
    """The CLI's executable under .agents/ at its pinned version, or skip the test saying why."""
    path = directory / command
    reason = AGENTS / f"{name}.unavailable"
    if not os.access(path, os.X_OK):
        why = reason.read_text().strip() if reason.is_file() else "`make agents` (.ci/agents) has not been run"
        pytest.skip(f"the real {name} CLI is not installed in {AGENTS}: {why}")
    version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60, check=False).stdout
    if pinned(package) not in version.split():  # "2.1.332 (Claude Code)", "codex-cli 0.171.0", "aider 0.86.2"
        pytest.skip(f"{path} is {version.strip() or 'broken'}, not the pinned {pinned(package)}: run `make agents`")
    return path


def claude() -> Path:
    return installed("claude", "claude", "@anthropic-ai/claude-code")


def codex() -> Path:
    return installed("codex", "codex", "@openai/codex")


def aider() -> Path:
    """aider: a PyPI CLI, in its own virtualenv, linked from .agents/bin/."""
    return installed("aider", "aider", "aider-chat", AGENTS / "bin")
