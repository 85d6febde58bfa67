"""The real-CLI tests cannot vanish unnoticed: a CLI that is missing or is not the pinned package skips its tests
with the reason, and fails them under CI=true; its identity is its package's, not what an executable prints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agents import clis

CLAUDE = "@anthropic-ai/claude-code"


def fake_claude(root: Path, version: str | None, *, linked: bool = True) -> tuple[Path, Path]:
    """A `claude` command under root/bin that prints the pinned version; with `version`, a package.json beside it
    declaring that; `linked`: the command is the package's own (a link into it, as npm makes)."""
    home = root / "node_modules" / CLAUDE
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "claude.exe").write_text(f"#!/bin/sh\necho '{clis.pinned(CLAUDE)} (Claude Code)'\n")
    (home / "bin" / "claude.exe").chmod(0o755)
    if version is not None:
        (home / "package.json").write_text(json.dumps({"name": CLAUDE, "version": version}))
    (root / "bin").mkdir()
    command = root / "bin" / "claude"
    if linked:
        command.symlink_to(home / "bin" / "claude.exe")
    else:
        command.write_text((home / "bin" / "claude.exe").read_text())
        command.chmod(0o755)
    return command.parent, home


def check(root: Path, version: str | None, *, linked: bool = True) -> Path:
    directory, home = fake_claude(root, version, linked=linked)
    return clis.installed("claude", "claude", CLAUDE, home, clis.npm_identity(CLAUDE), directory)


@pytest.fixture(autouse=True)
def agents_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clis, "AGENTS", tmp_path)
    monkeypatch.delenv("CI", raising=False)


def test_the_pinned_package_own_command_is_the_cli(tmp_path: Path) -> None:
    assert check(tmp_path, clis.pinned(CLAUDE)) == tmp_path / "bin" / "claude"


def test_a_missing_cli_skips_with_the_reason_and_fails_under_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "claude.unavailable").write_text("npm install @anthropic-ai/claude-code@2.1.332 failed: E404\n")
    with pytest.raises(pytest.skip.Exception, match="the real claude CLI is not installed .*: npm install .* failed"):
        clis.installed("claude", "claude", CLAUDE, tmp_path / "node_modules" / CLAUDE, None, tmp_path / "bin")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true and the real claude CLI is not installed"):
        clis.installed("claude", "claude", CLAUDE, tmp_path / "node_modules" / CLAUDE, None, tmp_path / "bin")


@pytest.mark.parametrize(("version", "linked", "said"), [
    ("9.9.9", True, f"declares {CLAUDE} 9.9.9, not {CLAUDE}"),
    (None, True, "declares no package"),
    ("pinned", False, "is not the @anthropic-ai/claude-code package's command"),
])
def test_an_executable_printing_the_pinned_version_is_not_enough(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str | None, linked: bool, said: str
) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=said):
        check(tmp_path, clis.pinned(CLAUDE) if version == "pinned" else version, linked=linked)
