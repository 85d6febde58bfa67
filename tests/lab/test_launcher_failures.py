"""Launchers per hypothesis, their pre-flight, and agents that cannot work at all.

A missing or broken agent must not burn the backlog: `orchard run` and
`orchard plan` refuse at the start (exit 2, one message) when a configured
CLI is missing, does not answer `--version`, or its own login status
command says it is not logged in while no credential variable of its is
set (the stand-in replays what the real CLIs printed), and a worker whose agent
reports its own error (Claude Code's `is_error` result, Codex's error events,
a launch line that exits 127) without changing anything returns its
hypothesis to the backlog with the agent's own words as the reason; the lab
stops after `[stop] launcher_failures` of them in a row. The agent CLIs are
the recording stand-in (tests/lab/standin.py) first on PATH.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchard.lab.db.state import LabState
from orchard.lab.records.events import ExperimentStarted, LabStopped, LauncherFailed
from orchard.lab.records.judgment import JudgmentEntry
from orchard.lab.workers.workspace.workspace_init import init_workspace
from tests.helpers import slow_but
from tests.lab.lab_helpers import ALPHA_TARGET, CLI_HELP, STDOUT_SUITE, command_launcher, git, lab_config, one_worker
from tests.lab.loop_support import snapshot

CONFIG = lab_config(
    target=ALPHA_TARGET,
    workers=one_worker(timeout_minutes=2),
    # the stand-in's misbehaviour; a worker inherits nothing it is not given
    launcher={"name": "claude", "pass_env": ["STANDIN_*"]},
    stop={"launcher_failures": 3, "top_attempted": 9},
    launchers={
        "codex": {"name": "codex", "pass_env": ["STANDIN_*"]},
        "shell": command_launcher("env no-such-agent-cli {prompt_file}"),
        "edit": command_launcher("printf 'alpha\\n' > {target_dir}/src/alpha.txt"),
    },
)

HYPOTHESES = """
[[hypothesis]]
id = "by-claude"
metric = "out/stdout_bytes"
change = "shorter alpha"
scope = ["src/alpha.txt"]
impact = 5

[[hypothesis]]
id = "by-codex"
metric = "out/stdout_bytes"
change = "shorter beta"
scope = ["src/beta.txt"]
launcher = "codex"
impact = 4

[[hypothesis]]
id = "by-shell"
metric = "out/stdout_bytes"
change = "shorter gamma"
scope = ["src/gamma.txt"]
launcher = "shell"
impact = 3

[[hypothesis]]
id = "never-tried"
metric = "out/stdout_bytes"
change = "anything"
scope = ["README"]
impact = 1
"""


CREDENTIAL_PREFIXES = ("ANTHROPIC_", "CLAUDE_CODE_", "OPENAI_", "CODEX_")  # none of the tester's own


def _orchard(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchard", *map(str, args)], capture_output=True, text=True,
                          timeout=600, env=env, check=False)


@pytest.fixture
def lab(tmp_path: Path, target_repo: Path, standin_bin: Path) -> tuple[Path, dict[str, str]]:
    bindir = standin_bin
    (tmp_path / "suite.toml").write_text(STDOUT_SUITE)
    (tmp_path / "orchard.toml").write_text(CONFIG)
    (tmp_path / "hypotheses.toml").write_text(HYPOTHESES)
    ws = init_workspace(tmp_path / "ws", str(target_repo), None, tmp_path / "orchard.toml")
    ours = {name: value for name, value in os.environ.items() if not name.startswith(CREDENTIAL_PREFIXES)}
    env = {**ours, "PATH": f"{bindir}:{os.environ['PATH']}"}
    added = _orchard("backlog", "add", ws.root, "--file", tmp_path / "hypotheses.toml", env=env)
    assert added.returncode == 0, added.stderr
    return ws.root, env


def _one_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def _recorded(cli: str, state: str) -> str:
    """What the real CLI's status command printed in that login state, with no credential set, on one line."""
    recorded = json.loads((CLI_HELP / "status-commands.json").read_text())
    entry = next(e for e in recorded["calls"] if e["cli"] == cli and e["state"] == state and not e.get("credential"))
    return " ".join((CLI_HELP / entry["output"]).read_text().split())


@pytest.mark.parametrize("command", slow_but(["run", "plan"], "run"))
def test_a_missing_or_logged_out_agent_is_refused_before_any_hypothesis_is_touched(
    lab: tuple[Path, dict[str, str]], command: str
) -> None:
    root, env = lab
    before = snapshot(root)
    missing = _one_error(_orchard(command, root, env={**env, "PATH": "/usr/local/bin:/usr/bin:/bin"}))  # no claude
    assert "launcher 'claude'" in missing and "`claude` is not on PATH" in missing
    message = _one_error(_orchard(command, root, env={**env, "STANDIN_LOGGED_OUT": "claude,codex"}))
    assert "launcher 'claude': `claude auth status --json` says it is not logged in (exit " in message
    assert _recorded("claude", "logged-out")[:200] in message  # the agent's own words
    assert "ANTHROPIC_API_KEY, CLAUDE_CODE_OAUTH_TOKEN is set" in message and "claude setup-token" in message
    if command == "run":  # every launcher a hypothesis may name is asked, each named with its own fix
        assert "launcher 'codex': `codex login status` says it is not logged in" in message
        assert _recorded("codex", "logged-out")[:200] in message and "OPENAI_API_KEY" in message
    else:  # the planner is the lab's default launcher only
        assert "codex" not in message
    assert snapshot(root) == before


def test_a_cli_that_does_not_answer_its_version_flag_is_refused(lab: tuple[Path, dict[str, str]]) -> None:
    root, env = lab
    before = snapshot(root)
    message = _one_error(_orchard("run", root, env={**env, "STANDIN_VERSION_FAILS": "1"}))
    assert "`claude --version` exited 3" in message and "broken install" in message
    assert "launcher 'codex'" in message  # every configured launcher is checked, each named
    assert snapshot(root) == before


@pytest.mark.slow
def test_agents_that_cannot_work_return_their_hypotheses_and_stop_the_lab(lab: tuple[Path, dict[str, str]]) -> None:
    root, env = lab
    result = _orchard("run", root, env={**env, "STANDIN_MODE": "auth-error"})
    assert result.returncode == 0, result.stdout + result.stderr
    state = LabState.open(root)
    try:
        failures = {e.event.hypothesis: e.event for e in state.events_of(LauncherFailed)}
        assert failures["by-claude"].reason == "launcher claude failed: claude: Not logged in · Please run /login"
        assert failures["by-codex"].reason == "launcher codex failed: codex: 401 Unauthorized: missing bearer token"
        assert failures["by-shell"].launcher == "shell" and "exit 127" in failures["by-shell"].reason
        assert "no-such-agent-cli" in failures["by-shell"].reason
        statuses = {h.id: (h.status, h.attempts) for h in state.hypotheses()}
        assert all(status == "open" for status, _ in statuses.values()), statuses  # nothing KILLed
        assert statuses["never-tried"] == ("open", 0)  # the lab stopped before the whole backlog was touched
        assert not state.events_of(JudgmentEntry)
        stop = state.events_of(LabStopped)[-1].event.reason
        assert stop.startswith("3 launcher failures in a row")
    finally:
        state.close()
    report = (root / "FINAL_REPORT.md").read_text()
    assert "Not logged in · Please run /login" in report and "went back to the backlog" in report
    assert "launcher `codex`" in (root / "JOURNAL.md").read_text()


@pytest.mark.slow  # a whole `orchard run`, two real verdicts (per-hypothesis launchers, fast: test_anti_gaming)
def test_a_patch_hypothesis_and_a_command_hypothesis_share_one_run(
    lab: tuple[Path, dict[str, str]], tmp_path: Path, target_repo: Path
) -> None:
    root, env = lab
    config = (root / "orchard.toml").read_text().replace('name = "claude"', 'name = "patch"', 1)
    config = config.replace('network = "api"', 'network = "none"', 1)  # claude's default; patch has no endpoint
    (root / "orchard.toml").write_text(config)
    patch = tmp_path / "beta.diff"
    patch.write_text("--- a/src/beta.txt\n+++ b/src/beta.txt\n@@ -1 +1 @@\n-beta 1\n+beta\n")
    state = LabState.open(root)
    try:
        for h in state.hypotheses():
            state.update_hypothesis(h.id, status="killed")  # only the two below run
    finally:
        state.close()
    # two ideas of their own: "shorter beta" and "shorter alpha" again, on the same files, would be refused as
    # near-duplicates of the KILLed by-codex and by-claude (docs/loop.md, "Near-duplicates")
    (tmp_path / "two.toml").write_text(f"""
[[hypothesis]]
id = "by-patch"
metric = "out/stdout_bytes"
change = "beta without its version number"
scope = ["src/beta.txt"]
patch = "{patch}"

[[hypothesis]]
id = "by-edit"
metric = "out/stdout_bytes"
change = "alpha without its version number"
scope = ["src/alpha.txt"]
launcher = "edit"
""")
    assert _orchard("backlog", "add", root, "--file", tmp_path / "two.toml", env=env).returncode == 0
    result = _orchard("run", root, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    state = LabState.open(root)
    try:
        ran = {e.event.hypothesis: e.event.launcher for e in state.events_of(ExperimentStarted)}
        assert ran == {"by-patch": "patch", "by-edit": "edit"}
        judged = {e.hypothesis: e.candidate.launcher for e in state.experiments() if e.decision and e.candidate}
        assert judged == {"by-patch": "patch", "by-edit": "edit"}
    finally:
        state.close()
    report = (root / "FINAL_REPORT.md").read_text()
    assert "via `patch`" in report and "via `edit`" in report
    assert json.loads(_orchard("status", root, "--json", env=env).stdout)["workers"] == []
    assert git(target_repo, "status", "--porcelain") == ""


@pytest.mark.slow
def test_backlog_add_refuses_an_unknown_metric_or_launcher(lab: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    root, env = lab
    before = snapshot(root)
    (tmp_path / "bad.toml").write_text("""
[[hypothesis]]
id = "typo"
metric = "out/stdout_byte"
change = "x"
scope = ["README"]
launcher = "gemini"
""")
    message = _one_error(_orchard("backlog", "add", root, "--file", tmp_path / "bad.toml", env=env))
    assert "metric 'out/stdout_byte' is not in the suite (known: out/stdout_bytes)" in message
    assert "launcher 'gemini' is not defined" in message and "codex, shell, edit" in message
    assert snapshot(root) == before


@pytest.mark.slow
def test_only_the_launcher_whose_agent_is_logged_out_is_named(lab: tuple[Path, dict[str, str]]) -> None:
    root, env = lab
    before = snapshot(root)
    message = _one_error(_orchard("run", root, env={**env, "STANDIN_LOGGED_OUT": "codex"}))
    assert "launcher 'codex': `codex login status` says it is not logged in (exit 1: Not logged in)" in message
    assert "launcher 'claude'" not in message and message.endswith("no hypothesis was touched")
    assert snapshot(root) == before


@pytest.mark.slow
def test_a_credential_variable_lets_a_logged_out_agent_run(lab: tuple[Path, dict[str, str]]) -> None:
    """Claude Code counts its key as a login; Codex still says "Not logged in", but its worker gets the key."""
    root, env = lab
    keys = {"ANTHROPIC_API_KEY": "canary-anthropic", "OPENAI_API_KEY": "canary-openai"}
    result = _orchard("run", root, env={**env, **keys, "STANDIN_LOGGED_OUT": "claude,codex",
                                        "STANDIN_MODE": "auth-error"})
    assert result.returncode == 0, result.stdout + result.stderr
    state = LabState.open(root)
    try:  # the run went on: workers started (and their agents, failing later, sent their hypotheses back)
        assert {e.event.launcher for e in state.events_of(ExperimentStarted)} >= {"claude", "codex"}
    finally:
        state.close()


@pytest.mark.slow
def test_a_cli_without_a_status_command_is_let_through_and_said_so(lab: tuple[Path, dict[str, str]]) -> None:
    root, env = lab
    result = _orchard("run", root, env={**env, "STANDIN_OLDER": "claude", "STANDIN_MODE": "auth-error"})
    assert result.returncode == 0, result.stdout + result.stderr
    said = " ".join(result.stderr.split())
    assert ("launcher 'claude': `claude auth status --json` could not tell whether it is logged in (exit 1: "
            f"{_recorded('claude', 'unknown')}; an older CLI may not have it); its login was not checked") in said
    assert "`codex login status` could not tell" not in said  # codex answered: logged in
    state = LabState.open(root)
    try:
        assert state.events("experiment-start")
    finally:
        state.close()
