"""Programs out of the sandbox uid's reach: as root, every sandbox runs as an unprivileged uid, so a launcher's
CLI or a build's program in a directory only root can enter is named up front (`orchard run` exits 2), and in
the judge's reason when a step fails on it, never a bare "Permission denied"."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from orchard import confine
from orchard.lab.workers.workspace import builds
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.lab_helpers import NO_CHANGE_BENCH, README_TARGET, command_launcher, lab_config, one_worker
from tests.lab.loop_support import snapshot


@pytest.fixture
def private_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory on PATH only root may enter (0700, as pytest's and mkdtemp's are), with two programs."""
    if not confine.dropping() or confine.unavailable() is not None:
        pytest.skip("needs root and a working bubblewrap (sandboxes drop to another uid only when orchard is root)")
    bindir = tmp_path / "private-bin"
    bindir.mkdir(mode=0o700)
    for name in ("private-agent", "private-build"):
        (bindir / name).write_text("#!/bin/sh\necho ran\n")
        (bindir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    return bindir


def test_orchard_run_refuses_a_launcher_and_a_build_the_sandbox_uid_cannot_run(
        private_bin: Path, make_workspace: Callable[..., Workspace]) -> None:
    ws = make_workspace(lab_config(target={**README_TARGET, "build": "private-build --all"}, bench=NO_CHANGE_BENCH,
                                   workers=one_worker(), launcher=command_launcher("true", executable="private-agent")))
    before = snapshot(ws.root)
    ran = subprocess.run([sys.executable, "-m", "orchard", "run", str(ws.root)], capture_output=True, text=True,
                         timeout=300, check=False)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    (line,) = [line for line in ran.stderr.splitlines() if line.strip()]
    assert f"[target] build: `private-build` ({private_bin / 'private-build'}) cannot be read" in line, line
    assert "launcher 'command': `private-agent`" in line and f"{private_bin} is closed to it" in line
    assert f"uid {confine.sandbox_id()}" in line and "chmod o+rX" in line and "Traceback" not in ran.stderr
    assert snapshot(ws.root) == before


def test_a_judge_step_failing_on_it_says_why_in_its_reason(
        private_bin: Path, make_workspace: Callable[..., Workspace]) -> None:
    ws = make_workspace('[target]\nbuild = "private-build"\n')
    checkout = builds.checkout_with_patch(ws, ws.judge_dir / "e1" / "target", ws.target_base(), "")
    check = builds.candidate_step(ws, "build", ws.config.target.build, checkout, {}, ws.judge_dir / "e1" / "logs")
    assert not check.passed
    assert f"{private_bin} is closed to it" in check.detail and "sandbox's uid" in check.detail, check.detail
    private_bin.chmod(0o755)  # what the message says to do
    assert builds.candidate_step(ws, "build", ws.config.target.build, checkout, {}, ws.judge_dir / "e1" / "logs").passed
