"""The GitHub Actions example's shell steps, run locally on a real git repository (no GitHub needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "ci" / "verdict.sh"
WORKFLOW = ROOT / "examples" / "ci" / "benchmark-verdict.yml"

SUITE = """
[suite]
name = "prog"
runs = 6
min_runs = 6
calibration_runs = 6

[[scenario]]
name = "report"
command = ["{bin}"]

[[metric]]
name = "stdout_bytes"

[[metric]]
name = "tool_call_count"
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with a build step, a bench suite and a base commit."""
    repo = tmp_path / "project"
    (repo / "src").mkdir(parents=True)
    (repo / "bench").mkdir()
    (repo / "src" / "prog.sh").write_text('#!/bin/sh\necho "total words: 42"\n')
    (repo / "build.sh").write_text("mkdir -p build && cp src/prog.sh build/prog && chmod +x build/prog\n")
    (repo / ".gitignore").write_text("build/\n")
    (repo / "bench" / "suite.toml").write_text(SUITE)
    _git(tmp_path, "init", "-q", "-b", "main", str(repo))
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "base")
    return repo


def _commit(repo: Path, text: str) -> None:
    (repo / "src" / "prog.sh").write_text(text)
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-am", "head")


def _run_steps(repo: Path, tmp_path: Path, base: str, **env: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    summary = tmp_path / "step-summary.md"
    summary.write_text("# earlier steps' summary\n")
    environment = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",  # orchard as pip installs it
        "BASE_SHA": base,
        "HEAD_DIR": str(repo),
        "BUILD": "sh build.sh",
        "BINARY": "build/prog",
        "SUITE": "bench/suite.toml",
        "WORK": str(tmp_path / "work"),
        "GITHUB_STEP_SUMMARY": str(summary),
        **env,
    }
    result = subprocess.run(
        ["bash", str(SCRIPT)], cwd=repo, env=environment, capture_output=True, text=True, timeout=600
    )
    return result, summary


def test_a_pull_request_that_prints_more_is_regressed_and_summarized(project: Path, tmp_path: Path) -> None:
    base = _git(project, "rev-parse", "HEAD")
    _commit(project, '#!/bin/sh\necho "total words: 42"\necho "and a lot more output than before"\n')
    result, summary = _run_steps(project, tmp_path, base)
    assert result.returncode == 1, result.stderr
    text = summary.read_text()
    assert text.startswith("# earlier steps' summary\n")  # appended, not overwritten
    assert "## orchard verdict: ❌ **REGRESSED**" in text
    assert "| `report/stdout_bytes` | regressed |" in text
    report = json.loads((tmp_path / "work" / "verdict.json").read_text())
    assert report["schema"] == "orchard.verdict/1" and report["verdict"] == "REGRESSED"
    assert "verdict: REGRESSED (exit 1, --fail-on regressed)" in result.stdout
    assert _git(project, "worktree", "list").count("\n") == 0  # the base worktree is removed


@pytest.mark.slow
def test_fail_on_any_fails_an_improvement_and_a_kept_calibration_is_reused(project: Path, tmp_path: Path) -> None:
    base = _git(project, "rev-parse", "HEAD")
    _commit(project, '#!/bin/sh\necho "total: 42"\n')
    calibration = tmp_path / "cache" / "calibration.json"
    first, summary = _run_steps(project, tmp_path, base, FAIL_ON="inconclusive", CALIBRATION=str(calibration))
    assert first.returncode == 0, first.stderr
    assert "**PASS**" in summary.read_text() and calibration.is_file()
    second, summary = _run_steps(project, tmp_path, base, FAIL_ON="any", CALIBRATION=str(calibration))
    assert second.returncode == 1
    assert "**PASS**" in summary.read_text() and "calibration: cached" in summary.read_text()


def test_the_workflow_runs_this_script_with_the_inputs_it_reads() -> None:
    workflow = WORKFLOW.read_text()
    assert "run: bash .github/orchard/verdict.sh" in workflow
    for name in ("BASE_SHA", "BUILD", "BINARY", "SUITE", "FAIL_ON", "CALIBRATION", "WORK"):
        assert f"{name}:" in workflow and name in SCRIPT.read_text()
    assert "github.event.pull_request.base.sha" in workflow and "fetch-depth: 0" in workflow
