"""Launch lines, checked flag by flag against the recorded `--help` of the CLI versions verified."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from orchard.errors import UsageError
from orchard.lab.config.sections import LauncherConfig
from orchard.lab.records.agent_usage import AgentUsage
from orchard.lab.records.experiment import Experiment
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.workers.launchers import agent_launchers, aider_launcher
from orchard.lab.workers.launchers.agent_login import CliAnswer, LoginState
from orchard.lab.workers.launchers.launchers import make_launcher
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.lab_helpers import CLI_HELP

HELP = CLI_HELP
HELP_FILES = {
    "claude": [f"claude-{agent_launchers.CLAUDE_VERSION}.txt"],
    "codex": [f"codex-exec-{agent_launchers.CODEX_VERSION}.txt"],
    "cursor": ["cursor-agent-docs.txt"],
    "aider": [f"aider-{aider_launcher.AIDER_VERSION}.txt"],
}
# Values the rendered lines pass that the help texts list among a flag's choices.
CHOICES = {
    "claude": ['"acceptEdits"', '"stream-json"'],
    "codex": ["danger-full-access"],  # inside orchard's sandbox (test_codex_keeps_its_own_sandbox_only_unsandboxed)
    "cursor": ["json"],
    "aider": [],
}

CONFIG = """
[target]
build = "cargo build --release"
test = "cargo test && ./scripts/check.sh"
binary = "target/release/app"
[bench]
measure = "python3 scripts/devloop.py --skip-build --bin {binary}"
"""


@pytest.fixture
def experiment(make_workspace: Callable[..., Workspace]) -> tuple[Workspace, Experiment]:
    workspace = make_workspace(CONFIG)
    checkout = workspace.setup_worker("w1")
    return workspace, Experiment("faster-index", Hypothesis(metric="m", change="c",
                                                             scope=("src/alpha.txt", "src/")), checkout)


def _flags(words: list[str]) -> list[str]:
    return [word for word in words if word.startswith("-") and not word.startswith("$")]


def _in_help(flag: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text) is not None


@pytest.mark.parametrize("cli", ["claude", "codex", "cursor", "aider"])
def test_every_flag_of_the_launch_line_is_in_the_verified_help(
    cli: str, experiment: tuple[Workspace, Experiment]
) -> None:
    workspace, exp = experiment
    launcher = make_launcher(LauncherConfig(name=cli, model="a-model"))
    line = launcher.command(launcher.context(workspace, exp))
    words = shlex.split(line)
    help_text = "\n".join((HELP / name).read_text() for name in HELP_FILES[cli])
    flags = _flags(words)
    assert "--model" in flags
    missing = [flag for flag in flags if not _in_help(flag, help_text)]
    assert missing == [], f"{cli}: flags not in the recorded help: {missing}"
    for value in CHOICES[cli]:
        assert value in help_text and value.strip('"') in words
    prompt = f"$(cat {workspace.prompt_path('faster-index')})"
    if cli == "aider":
        assert words[words.index("--message-file") + 1] == str(workspace.prompt_path("faster-index"))
        files = [words[i + 1] for i, word in enumerate(words) if word == "--file"]
        assert files == ["src/alpha.txt", str(workspace.worker("w1").target_dir / ".orchard-report.json")]
    elif cli == "claude":
        assert words[1:3] == ["-p", prompt]  # before the options that take several values
    else:
        assert words[-1] == prompt


def test_codex_keeps_its_own_sandbox_only_unsandboxed_and_takes_a_base_url_as_a_provider(
    experiment: tuple[Workspace, Experiment]
) -> None:
    """Codex's own sandbox is a bubblewrap that cannot start inside orchard's ("bwrap: setting up uid map:
    Operation not permitted" for every command, seen with Codex 0.171.0); unsandboxed it is the only one."""
    workspace, exp = experiment
    launcher = make_launcher(LauncherConfig(name="codex", base_url="http://127.0.0.1:8000/v1"))
    context = launcher.context(workspace, exp)
    inside = shlex.split(launcher.command(context))
    alone = shlex.split(launcher.command(dataclasses.replace(context, sandbox="none")))
    assert inside[inside.index("--sandbox") + 1] == "danger-full-access" and "--add-dir" not in inside
    assert alone[alone.index("--sandbox") + 1] == "workspace-write"
    assert alone[alone.index("--add-dir") + 1] == str(context.paths.bench_dir)
    settings = [inside[i + 1] for i, word in enumerate(inside) if word == "-c"]
    # under network = "api" (codex's default): no update check, analytics, plugins or apps
    # (tests/agents/test_codex_lab.py: no egress refusal)
    assert settings[:6] == list(agent_launchers.CODEX_QUIET) and "features.plugins=false" in settings
    assert settings[6] == "model_provider=orchard"
    provider = tomllib.loads(settings[7].replace("model_providers.orchard=", "provider = ", 1))["provider"]
    assert provider == {"name": "orchard", "base_url": "http://127.0.0.1:8000/v1", "env_key": "OPENAI_API_KEY",
                        "wire_api": "responses"}
    plain = shlex.split(make_launcher(LauncherConfig(name="codex", network="all")).command(context))
    assert "-c" not in plain
    probe = make_launcher(LauncherConfig(name="codex", base_url="http://127.0.0.1:8000/v1")).probe_words()
    # its test request gets an answer now: Codex retries even a refused key five times
    assert probe is not None and any("request_max_retries = 0, stream_max_retries = 0}" in word for word in probe)


def test_claude_tools_cover_the_configured_commands_only(experiment: tuple[Workspace, Experiment]) -> None:
    workspace, exp = experiment
    launcher = make_launcher(LauncherConfig(name="claude"))
    words = shlex.split(launcher.command(launcher.context(workspace, exp)))
    tools = words[words.index("--allowedTools") + 1].split(",")
    assert tools == ["Read", "Edit", "Write", "Grep", "Glob", "Bash(git diff *)", "Bash(git status *)",
                     "Bash(cargo *)", "Bash(./scripts/check.sh *)", "Bash(python3 *)"]
    assert words[words.index("--add-dir") + 1] == str(exp.checkout.worker.bench_dir)
    chosen = make_launcher(LauncherConfig(name="claude", allowed_tools=["Read", "Bash(make *)"]))
    words = shlex.split(chosen.command(chosen.context(workspace, exp)))
    assert words[words.index("--allowedTools") + 1] == "Read,Bash(make *)"


def test_patch_and_command_launchers(experiment: tuple[Workspace, Experiment], tmp_path: Path) -> None:
    workspace, exp = experiment
    patch = make_launcher(LauncherConfig(name="patch"))
    with pytest.raises(UsageError, match="needs a hypothesis with a ready `patch`"):
        patch.command(patch.context(workspace, exp))
    ready = tmp_path / "ready.diff"
    ready.write_text("")
    with_patch = Experiment(exp.name, Hypothesis(metric="m", change="c", patch=str(ready)), exp.checkout)
    words = shlex.split(patch.command(patch.context(workspace, with_patch)))
    binary = exp.checkout.worker.target_dir / "target/release/app"
    assert words[1:3] == ["-m", "orchard.lab.workers.launchers.patch_worker"]
    assert words[words.index("--measure") + 1] == (
        f"python3 scripts/devloop.py --skip-build --bin {binary}")
    assert words[words.index("--patch") + 1] == str(ready)
    command = make_launcher(LauncherConfig(name="command", template="my-agent {prompt_file} --out {report}"))
    line = command.command(command.context(workspace, exp))
    assert shlex.split(line) == ["my-agent", str(workspace.prompt_path(exp.name)), "--out",
                                 str(exp.checkout.worker.report_path)]


def test_usage_is_read_from_what_the_real_clis_printed() -> None:
    claude = agent_launchers.ClaudeLauncher()
    usage = claude.usage("[claude-code:unrecognized_model] {}\n" + (HELP / "claude-2.1.332-result.json").read_text())
    assert (usage.cost_usd, usage.input_tokens, usage.output_tokens, usage.turns) == (0, 0, 0, 1)
    assert usage.source and "claude" in usage.source
    # Codex gave up on the network before any turn completed: no usage, not zeros.
    codex = agent_launchers.CodexLauncher().usage((HELP / "codex-0.171.0-events.jsonl").read_text())
    assert codex == AgentUsage()
    assert agent_launchers.ClaudeLauncher().usage("no json at all") == AgentUsage()


STATUS_HELP = {"claude": ["claude-2.1.197-auth-help.txt", "claude-2.1.197-auth-status-help.txt"],
               "codex": ["codex-0.171.0-login-help.txt", "codex-0.171.0-login-status-help.txt"]}


@pytest.mark.parametrize("cli", ["claude", "codex"])
def test_the_login_status_command_is_in_the_recorded_help(cli: str) -> None:
    """`claude auth status --json` and `codex login status`, as their real `--help` lists them."""
    group, command, *flags = make_launcher(LauncherConfig(name=cli)).status_command
    help_text = "\n".join((HELP / name).read_text() for name in STATUS_HELP[cli])
    assert re.search(rf"^Usage: {cli} {group} ", help_text, re.MULTILINE)
    assert re.search(rf"^  {command}\b", help_text, re.MULTILINE)  # listed among the group's commands
    assert all(_in_help(flag, help_text) for flag in flags)


def test_the_login_state_is_read_from_what_the_real_clis_printed() -> None:
    recorded = json.loads((HELP / "status-commands.json").read_text())["calls"]
    assert {e["state"] for e in recorded} == {state.value for state in LoginState}
    for entry in recorded:
        launcher = make_launcher(LauncherConfig(name=entry["cli"]))
        assert entry["argv"] == list(launcher.status_command)
        answer = CliAnswer(entry["exit_code"], (HELP / entry["output"]).read_text().strip())
        assert launcher.login_state(answer) == entry["state"], entry
    cursor, aider = (make_launcher(LauncherConfig(name=name)) for name in ("cursor", "aider"))
    assert cursor.check_login() is None and aider.check_login() is None  # neither CLI has a verified status command


def test_aider_usage_lines_with_cache_counts() -> None:
    log = ("Tokens: 12k sent, 2.5k cache write, 9.1k cache hit, 1.1k received. "
           "Cost: $0.05 message, $0.05 session.\n"
           "Tokens: 800 sent, 120 received. Cost: $0.01 message, $0.06 session.\n")
    usage = aider_launcher.AiderLauncher().usage(log)
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens,
            usage.cost_usd, usage.turns) == (12800, 1220, 9100, 2500, 0.06, 2)


def test_unknown_launcher_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown launcher"):
        make_launcher(LauncherConfig(name="gpt"))


def test_codex_and_aider_errors_are_read_with_their_status_and_only_when_no_reply_followed() -> None:
    """As the real CLIs print them (codex 0.171.0 `--json` events, aider 0.86.2 with litellm): a refused key is
    `auth`, a rate limit transient; an error a later reply followed was retried and worked, so it is no error."""
    codex, aider = make_launcher(LauncherConfig(name="codex")), make_launcher(LauncherConfig(name="aider"))
    refused = '{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized: Incorrect API key"}}'
    retried = ('{"type":"error","message":"Reconnecting... 1/5 (unexpected status 503 Service Unavailable: busy)"}\n'
               '{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":2}}')
    error = codex.agent_error(refused, 1)
    assert error is not None and (error.kind, error.status) == ("auth", 401), error
    assert codex.agent_error(retried, 0) is None
    limited = "litellm.RateLimitError: RateLimitError: OpenAIException - slow down\nRetrying in 0.2 seconds...\n"
    error = aider.agent_error(limited, 0)
    assert error is not None and error.kind == "rate-limited" and error.kind.transient, error
    assert aider.agent_error(limited + "Tokens: 4.1k sent, 260 received.\n", 0) is None
    unreachable = aider.agent_error("litellm.InternalServerError: InternalServerError: OpenAIException - "
                                    "Connection error.\n", 0)
    assert unreachable is not None and unreachable.kind == "unreachable", unreachable
