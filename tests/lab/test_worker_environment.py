"""Canaries: secrets in the orchestrator's environment reach no worker and no judge step.

Each test sets fake secrets (values starting `canary-`) in orchard's own
environment, runs the real thing (a lab worker through its launcher and an
executor, or a judge step), and reads back which canaries it saw: a worker
gets exactly the credentials its launcher declares (and `pass_env`), a judge
step none.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from orchard.bench.measuring.measure import RunSpec, observe, workbench
from orchard.bench.suites.suite_reader import load_suite
from orchard.lab.db.state import LabState
from orchard.lab.judge import measuring as verdicts
from orchard.lab.records.experiment import Experiment
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.workers.executors import make_executor
from orchard.lab.workers.launchers.launchers import make_launcher
from orchard.lab.workers.workspace import builds
from orchard.lab.workers.workspace.prompts import render_prompt
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.lab_helpers import assert_nothing_left
from tests.lab.standin import CANARY

SECRETS = ("AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "OPENAI_API_KEY",
           "CURSOR_API_KEY", "DEPLOY_SIGNING_SECRET")
DECLARED = {
    "claude": {"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"},
    "codex": {"OPENAI_API_KEY"},
    "cursor": {"CURSOR_API_KEY"},
    "aider": {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"},
    "patch": set(),
    "command": set(),
}
PATCH = "--- a/src/alpha.txt\n+++ b/src/alpha.txt\n@@ -1 +1 @@\n-alpha 1\n+alpha 2\n"


@pytest.fixture
def canaries(monkeypatch: pytest.MonkeyPatch, mark: str) -> None:
    """Every secret set in orchard's own environment, and the test's process mark (an ORCHARD_ variable)."""
    for name in SECRETS:
        monkeypatch.setenv(name, CANARY + name)
    monkeypatch.setenv("ORCHARD_TEST_MARK", mark)


def seen(text: str) -> set[str]:
    """The canaries whose value appears in a log."""
    return {name for name in SECRETS if CANARY + name in text}


def run_worker(workspace: Workspace, hypothesis: Hypothesis, kind: str = "subprocess") -> str:
    """One real worker through its launcher and an executor; its log."""
    (checkout,) = workspace.setup_workers(["w0"])
    experiment = Experiment("canary", hypothesis, checkout)
    render_prompt(workspace, experiment)
    launcher = make_launcher(workspace.config.launcher)
    with make_executor(kind, workspace.tmux_socket) as executor:
        executor.start(launcher.job(workspace, experiment))
        (result,) = executor.wait(timeout_s=120)
    assert result.exit_code == 0, result.log_path.read_text()
    return result.log_path.read_text()


LAUNCHER_CONFIG = {
    "claude": '[launcher]\nname = "claude"\n',
    "codex": '[launcher]\nname = "codex"\n',
    "cursor": '[launcher]\nname = "cursor"\n',
    "aider": '[launcher]\nname = "aider"\n',
    "patch": '[target]\nbuild = "env"\n[launcher]\nname = "patch"\n',
    "command": '[launcher]\nname = "command"\ntemplate = "env"\n',
}


@pytest.mark.parametrize("launcher", list(LAUNCHER_CONFIG))
def test_a_worker_sees_only_the_credentials_its_launcher_declares(
    launcher: str, make_workspace: Callable[..., Workspace], standin_bin: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, canaries: None, mark: str
) -> None:
    monkeypatch.setenv("PATH", f"{standin_bin}:{os.environ['PATH']}")  # orchard's own PATH: no job env at all
    workspace = make_workspace(LAUNCHER_CONFIG[launcher])
    patch = tmp_path / "change.diff"
    patch.write_text(PATCH)
    hypothesis = Hypothesis(metric="m", change="c", scope=("src/alpha.txt",), patch=str(patch))
    log = run_worker(workspace, hypothesis, kind="tmux" if launcher == "claude" else "subprocess")
    assert_nothing_left(mark, workspace.tmux_socket)  # the mark reached the worker: this check can fail

    assert seen(log) == DECLARED[launcher], log
    if launcher == "command":  # the environment is the allowlist plus HOME and TMPDIR, both private
        names = set(re.findall(r"^([A-Za-z_][A-Za-z0-9_]*)=", log, re.MULTILINE))
        own = {name for name in names if name.startswith("ORCHARD_")}  # orchard's settings and the test's mark
        assert names - own <= {"PATH", "LANG", "TERM", "TZ", "HOME", "TMPDIR", "PWD", "SHLVL", "_"}
        worker = workspace.worker("w0")
        assert f"HOME={worker.home_dir}\n" in log and f"TMPDIR={worker.tmp_dir}\n" in log
        assert f"ORCHARD_TEST_MARK={mark}\n" in log


def test_pass_env_gives_a_worker_one_more_variable(
    make_workspace: Callable[..., Workspace], canaries: None
) -> None:
    workspace = make_workspace('[launcher]\nname = "command"\ntemplate = "env"\npass_env = ["DEPLOY_SIGNING_*"]\n')
    log = run_worker(workspace, Hypothesis(metric="m", change="c", scope=("src/alpha.txt",)))
    assert seen(log) == {"DEPLOY_SIGNING_SECRET"}


def test_the_judges_build_test_and_harness_steps_see_no_secret(
    make_workspace: Callable[..., Workspace], canaries: None, tmp_path: Path
) -> None:
    workspace = make_workspace('[target]\nbuild = "env"\ntest = "env"\n[bench]\ntest = "env"\n')
    values = builds.placeholders(workspace, workspace.reference_target, None)
    logs = tmp_path / "logs"
    for name, template in (("build", workspace.config.target.build), ("tests", workspace.config.target.test)):
        check = builds.run_step(name, template, workspace.reference_target, values, logs)
        assert check.passed and seen(Path(str(check.log)).read_text()) == set(), name
    state = LabState.open(workspace.root)
    try:
        check = builds.harness_tests(workspace, state, workspace.bench_base(), values, logs)
    finally:
        state.close()
    text = Path(str(check.log)).read_text()
    assert check.passed and seen(text) == set() and "PATH=" in text


def test_lab_pass_env_gives_the_judges_steps_one_more_variable(
    make_workspace: Callable[..., Workspace], canaries: None, tmp_path: Path
) -> None:
    workspace = make_workspace('[lab]\npass_env = ["GITHUB_TOKEN"]\n')
    check = builds.run_step("build", "env", tmp_path, {}, tmp_path / "logs", pass_env=workspace.config.lab.pass_env)
    assert seen(Path(str(check.log)).read_text()) == {"GITHUB_TOKEN"}


def test_a_measured_command_sees_no_secret(canaries: None, tmp_path: Path) -> None:
    seen_file = tmp_path / "measured-env.txt"
    suite_file = tmp_path / "suite.toml"
    suite_file.write_text(f'[[scenario]]\nname = "env"\ncommand = "env > {seen_file}"\n'
                          '[[metric]]\nname = "wall_ms"\n')
    suite = load_suite(suite_file)
    with workbench(suite) as bench:
        spec = RunSpec("candidate", {"name": "candidate"}, 0, {}, {"wall_ms"})
        observe(bench, suite.scenarios[0], Path("/bin/true"), spec)
    text = seen_file.read_text()
    assert "PATH=" in text and seen(text) == set()


def test_the_benchs_own_verdict_command_sees_no_secret(
    make_workspace: Callable[..., Workspace], canaries: None
) -> None:
    # the script runs confined (nothing it writes outside its scratch survives): what it saw is read from its output
    workspace = make_workspace('[bench]\nverdict = "env; echo NO-CHANGE"\n')
    verdict = verdicts.external_verdict(workspace, Path("/bin/true"), Path("/bin/true"))
    assert verdict.external is not None
    text = verdict.external.output_tail
    assert verdict.verdict == "NO-CHANGE" and "PATH=" in text and seen(text) == set()
