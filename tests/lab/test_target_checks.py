"""The target and its build as a user first meets them (issue 34, item 5).

On main: a working tree with uncommitted edits was used silently (HEAD only); a directory that is not a
repository, or one with no commit, gave git's raw errors (three lines of `fatal: ambiguous argument 'HEAD'`);
`[workers] count = 2` alone was refused ("exploit + explore lanes (2 + 1) must equal count (2)"); a build that
failed offline in pip showed pip's last line only; a lab with an empty backlog built its target and calibrated
before it stopped.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchard import confine
from orchard.cli import cli
from orchard.lab.config.orchard_toml import load
from orchard.lab.db.state import LabState
from orchard.lab.records.lab_start import LabStart
from orchard.lab.workers.workspace import builds
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.lab_helpers import (
    ALPHA_TARGET,
    STDOUT_SUITE,
    TARGET_FILES,
    command_launcher,
    git,
    lab_config,
    make_repo,
    one_worker,
)


def _init(tmp_path: Path, target: Path, config: str | None = None) -> tuple[int, str]:
    args = ["init", str(tmp_path / "ws"), "--target", str(target)]
    if config is not None:
        (tmp_path / "suite.toml").write_text(STDOUT_SUITE)
        (tmp_path / "orchard.toml").write_text(config)
        args += ["--config", str(tmp_path / "orchard.toml")]
    result = CliRunner().invoke(cli, args)
    return result.exit_code, result.output


def test_a_directory_that_is_not_a_repository_or_has_no_commit_is_one_line_and_exit_2(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.py").write_text("x = 1\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    for target, said in ((plain, "not a git repository (no .git in it): run `git init` there"),
                         (empty, f"a git repository with no commit yet: commit the code first (`git -C {empty} add")):
        code, output = _init(tmp_path, target)
        assert code == 2 and output.count("\n") == 1, output
        assert output.startswith(f"orchard: error: target.repo {target}: {said}"), output
        assert "fatal:" not in output and not (tmp_path / "ws").exists()


def test_workers_count_alone_derives_its_lanes_and_a_mismatch_says_what_to_write(tmp_path: Path) -> None:
    target = make_repo(tmp_path / "myproject", TARGET_FILES)
    code, output = _init(tmp_path, target, lab_config(target=ALPHA_TARGET, workers={"count": 2}))
    assert code == 0, output
    workers = load(tmp_path / "ws" / "orchard.toml").workers
    assert (workers.count, workers.exploit, workers.explore) == (2, 2, 0)
    code, output = _init(tmp_path, target, lab_config(target=ALPHA_TARGET,
                                                      workers={"count": 2, "exploit": 2, "explore": 1}))
    assert code == 2
    assert "leave exploit and explore out to derive them from count (count = 2: exploit = 2, explore = 0)" in output


def test_uncommitted_edits_are_named_at_init_and_an_empty_backlog_stops_before_building(tmp_path: Path) -> None:
    target = make_repo(tmp_path / "myproject", TARGET_FILES)
    (target / "README").write_text("edited, not committed\n")
    (target / "notes.txt").write_text("new\n")
    head = git(target, "rev-parse", "HEAD").strip()
    code, output = _init(tmp_path, target, lab_config(
        target=ALPHA_TARGET, workers=one_worker(sandbox="none"), launcher=command_launcher("true")))
    assert code == 0, output
    said = (f"warning: target.repo {target} has uncommitted changes (2 files: README, notes.txt): the lab works from "
            f"commits only (HEAD, {head[:12]}), never from uncommitted edits")
    assert said in output, output
    root = tmp_path / "ws"
    ran = subprocess.run([sys.executable, "-m", "orchard", "run", str(root)], capture_output=True, text=True,
                         timeout=300, check=False)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert f"target.repo {target} has uncommitted changes (2 files" in ran.stdout + ran.stderr
    assert "the backlog is empty: nothing was built or calibrated" in ran.stdout
    state = LabState.open_readonly(root)
    try:
        assert state.events_of(LabStart) == [] and state.measurements() == []  # on main: built and calibrated
    finally:
        state.close()


@pytest.mark.parametrize("network", [False, True])
def test_an_offline_build_failing_on_a_package_index_names_build_network(
        make_workspace: Callable[..., Workspace], network: bool) -> None:
    if confine.unavailable() is not None:
        pytest.skip("needs a working bubblewrap: only a sandboxed build is offline")
    pip = ("printf 'ERROR: Could not find a version that satisfies the requirement tomli\\n"
           "ERROR: No matching distribution found for tomli\\n' >&2; exit 1")
    ws = make_workspace(f'[target]\nbuild = "{pip}"\nbuild_network = {str(network).lower()}\n')
    checkout = builds.checkout_with_patch(ws, ws.judge_dir / "e1" / "target", ws.target_base(), "")
    check = builds.candidate_step(ws, "build", ws.config.target.build, checkout, {}, ws.judge_dir / "e1" / "logs")
    assert not check.passed
    assert "No matching distribution found for tomli" in check.detail
    assert ("set `[target] build_network = true`" in check.detail) is not network, check.detail
