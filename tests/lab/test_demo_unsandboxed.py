"""The demo runs on a machine where bubblewrap cannot make a sandbox: unsandboxed, and saying so everywhere.

Its workers apply orchard's own ready patches, so the demo may run without the sandbox; a user's lab may not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from orchard.demo.make import demo_sandbox
from orchard.lab.db.state import LabState
from orchard.lab.notebook import files as records
from orchard.lab.notebook import view
from orchard.lab.workers.sandbox.sandbox import SandboxMode
from orchard.lab.workers.workspace.workspace import Workspace


@pytest.fixture
def broken_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A PATH whose `bwrap` cannot make a sandbox, as in a container without user namespaces."""
    bindir = tmp_path / "no-userns"
    bindir.mkdir()
    stub = bindir / "bwrap"
    stub.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    stub.chmod(0o755)
    path = f"{bindir}{os.pathsep}{os.environ['PATH']}"
    monkeypatch.setenv("PATH", path)
    return path


def test_without_a_working_bwrap_the_demo_falls_back_and_says_why(broken_bwrap: str) -> None:
    mode, note = demo_sandbox()
    assert mode == SandboxMode.NONE
    assert note is not None and "WITHOUT a sandbox" in note and "No permissions to create new namespace" in note
    assert "never falls back" in note  # a user's own lab is not the demo


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed here")
def test_with_a_working_bwrap_the_demo_is_sandboxed() -> None:
    assert demo_sandbox() == (SandboxMode.BWRAP, None)


def test_an_unsandboxed_labs_final_report_says_so_at_the_top(make_workspace: Callable[..., Workspace]) -> None:
    reports = {}
    for mode in ("none", "bwrap"):
        ws = make_workspace(f'[workers]\nsandbox = "{mode}"\n', name=mode)
        state = LabState.open(ws.root)
        try:
            reports[mode] = records.render_final_report(view.build(ws, state, live=False))
        finally:
            state.close()
    assert "**UNSANDBOXED: workers run without bubblewrap" in reports["none"]
    assert reports["none"].index("UNSANDBOXED") < reports["none"].index("## Landed changes")
    assert "UNSANDBOXED" not in reports["bwrap"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_orchard_demo_runs_to_its_report_where_bwrap_cannot_sandbox(tmp_path: Path, broken_bwrap: str) -> None:
    root = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-m", "orchard", "demo", "--workspace", str(root), "--workers", "2",
                           "--executor", "subprocess"], capture_output=True, text=True, timeout=850,
                          env={**os.environ, "PATH": broken_bwrap})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "note: the demo runs its workers WITHOUT a sandbox" in proc.stdout
    report = (root / "FINAL_REPORT.md").read_text()
    assert "UNSANDBOXED" in report and "2 landed" in report
