"""The real agent CLIs the tests run, as `.ci/agents` (`make agents`) installed them into `.agents/`: each known
by its package (name and version declared in its package.json or dist-info), never by what an executable
prints; a missing one skips its tests with the reason, and fails them under CI=true."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import NoReturn

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


def unavailable(reason: str) -> NoReturn:
    """Skip a test whose CLI is missing, saying why; under CI=true fail instead, so coverage cannot vanish."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


def npm_identity(package: str) -> tuple[str, str] | None:
    """The name and version an npm package under .agents/ declares in its package.json."""
    try:
        declared = json.loads((AGENTS / "node_modules" / package / "package.json").read_text())
    except (OSError, ValueError):
        return None
    return str(declared.get("name")), str(declared.get("version"))


def pypi_identity(venv: Path, project: str) -> tuple[str, str] | None:
    """The name and version a PyPI project in `venv` declares in its dist-info METADATA."""
    for metadata in venv.glob("lib/python*/site-packages/*.dist-info/METADATA"):
        fields = dict(line.split(": ", 1) for line in metadata.read_text().splitlines()[:10] if ": " in line)
        if fields.get("Name", "").lower() == project.lower():
            return fields["Name"], fields.get("Version", "")
    return None


def installed(name: str, command: str, package: str, home: Path, identity: tuple[str, str] | None,
              directory: Path = NPM_BIN) -> Path:
    """The CLI's executable under .agents/, found inside `home` (its package's directory) whose declared
    `identity` is `package` at its pinned version; else skip the test saying why (fail under CI=true)."""
    path = directory / command
    reason = AGENTS / f"{name}.unavailable"
    if not os.access(path, os.X_OK):
        why = reason.read_text().strip() if reason.is_file() else "`make agents` (.ci/agents) has not been run"
        unavailable(f"the real {name} CLI is not installed in {AGENTS}: {why}")
    if home.resolve() not in path.resolve().parents:
        unavailable(f"{path} is not the {package} package's command ({home}): run `make agents`")
    if identity != (package, pinned(package)):
        found = " ".join(identity) if identity else "no package"
        unavailable(f"{home} declares {found}, not {package} {pinned(package)}: run `make agents`")
    return path


def claude() -> Path:
    package = "@anthropic-ai/claude-code"
    return installed("claude", "claude", package, AGENTS / "node_modules" / package, npm_identity(package))


def codex() -> Path:
    package = "@openai/codex"
    return installed("codex", "codex", package, AGENTS / "node_modules" / package, npm_identity(package))


def aider() -> Path:
    """aider: a PyPI CLI, in its own virtualenv, linked from .agents/bin/."""
    venv = AGENTS / "aider"
    return installed("aider", "aider", "aider-chat", venv, pypi_identity(venv, "aider-chat"), AGENTS / "bin")
