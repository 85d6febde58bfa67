"""Launchers for the agent CLIs: claude, codex, cursor (aider: `aider_launcher.py`).

Each renders its CLI's launch line and reads the agent's cost and token
usage back from the worker's log where the CLI prints them.

Flags were checked against each CLI's own `--help` (recorded under
tests/lab/data/cli-help/, which the tests compare every rendered flag against):

| launcher | CLI | version checked | how |
| --- | --- | --- | --- |
| claude | `claude` (npm @anthropic-ai/claude-code) | 2.1.332 | `claude --help` |
| codex | `codex exec` (npm @openai/codex) | 0.171.0 | `codex exec --help` |
| cursor | `agent` (Cursor's CLI) | docs only | not on npm/PyPI (no download here); flags per cursor.com/docs/cli |
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from pathlib import Path

from orchard.jsonlines import json_objects
from orchard.lab.config.prices import ModelPrice, estimate, price_of
from orchard.lab.records.agent_errors import AgentError, AgentErrorKind, http_kind
from orchard.lab.records.agent_usage import AgentUsage
from orchard.lab.records.experiment import Commands
from orchard.lab.records.network import Network
from orchard.lab.workers.launchers.agent_login import CliAnswer, LoginState
from orchard.lab.workers.launchers.cli_retries import (
    claude_answered,
    claude_backoff,
    claude_retrying,
    codex_answered,
    codex_span_s,
)
from orchard.lab.workers.launchers.launcher_base import LaunchContext, Launcher, join_words, prompt_arg
from orchard.lab.workers.sandbox.allowlist import worker_names
from orchard.lab.workers.sandbox.sandbox import SandboxMode

CLAUDE_VERSION = "2.1.332"
CODEX_VERSION = "0.171.0"
CURSOR_VERSION = "docs"  # Cursor's CLI is not obtainable here; see the module docstring

# Why a login in your own home is no fix: a worker never sees it.
OWN_HOME = "a worker starts with an empty HOME of its own, so a login stored in yours does not reach it"

# Tools a Claude worker always has: read and edit files, search, and look
# at its own changes.
# Pre-flight's test request (`agent_probe.py`): a few tokens.
PROBE_ASK = "Answer with the one word: ready"
# Codex settings under `network = "api"`: none of its own traffic besides the model endpoint (each would be one
# `refused` line in the worker's log): with 0.171.0 its curated plugin repository (github.com, api.github.com)
# and its apps and remote plugins (chatgpt.com) were asked for at every start, however it was logged in.
_CODEX_STATUS = re.compile(r"\bstatus:? (\d{3})\b")  # "unexpected status 401", "last status: 429"
CODEX_QUIET = ("check_for_update_on_startup=false", "analytics.enabled=false", "features.plugins=false",
               "features.remote_plugin=false", "features.plugin_sharing=false", "features.apps=false")

CLAUDE_BASE_TOOLS = ("Read", "Edit", "Write", "Grep", "Glob", "Bash(git diff *)", "Bash(git status *)")



def _shell_tools(commands: Commands) -> list[str]:
    """`Bash(<program> *)` for each program the configured commands start."""
    tools: list[str] = []
    for command in (commands.build, commands.test, commands.measure):
        if not command:
            continue
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        at_start = True
        for token in lexer:
            if token in ("&&", "||", ";", "|", "&", "(", ")"):
                at_start = True
                continue
            if at_start and "=" not in token:
                tool = f"Bash({token} *)"
                if tool not in tools:
                    tools.append(tool)
                at_start = False
    return tools


class ClaudeLauncher(Launcher):
    """Claude Code in print mode: edits accepted, tools limited, JSON result with cost."""

    name = "claude"
    default_executable = "claude"
    credentials = ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN")
    status_command = ("auth", "status", "--json")
    login_fix = (f"set CLAUDE_CODE_OAUTH_TOKEN (from `claude setup-token`) or ANTHROPIC_API_KEY where orchard runs; "
                 f"{OWN_HOME}")
    default_base_url = "https://api.anthropic.com"
    base_url_variable = "ANTHROPIC_BASE_URL"

    def environment(self) -> dict[str, str]:
        """`base_url` as ANTHROPIC_BASE_URL; under `api`, no telemetry or update traffic the proxy would refuse."""
        values = {"ANTHROPIC_BASE_URL": self.config.base_url} if self.config.base_url else {}
        if self.config.network == Network.API:
            values["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
        return values

    def login_state(self, answer: CliAnswer) -> LoginState:
        """`claude auth status --json` prints one JSON object with `loggedIn` (exit 1 when false)."""
        try:
            status = json.loads(answer.output)
        except json.JSONDecodeError:
            return LoginState.UNKNOWN
        logged_in = status.get("loggedIn") if isinstance(status, dict) else None
        if not isinstance(logged_in, bool):
            return LoginState.UNKNOWN
        return LoginState.LOGGED_IN if logged_in else LoginState.LOGGED_OUT

    def allowed_tools(self, commands: Commands) -> list[str]:
        if self.config.allowed_tools:
            return list(self.config.allowed_tools)
        return [*CLAUDE_BASE_TOOLS, *_shell_tools(commands)]

    def command(self, context: LaunchContext) -> str:
        tools = ",".join(self.allowed_tools(context.commands))
        # The prompt goes right after -p: --allowedTools and --add-dir take
        # several values and would swallow a prompt placed after them.
        head = f"{shlex.quote(self.executable)} -p {prompt_arg(context.paths.prompt_file)}"
        # stream-json (it needs --verbose with -p): every message and tool call, one JSON object a line, ends
        # with the same `result` object `json` prints alone; the dashboard shows the log as the conversation
        words = [
            "--output-format",
            "stream-json",
            "--verbose",
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            tools,
            "--add-dir",
            str(context.paths.bench_dir),
        ]
        return " ".join(part for part in (head, join_words(words), self._tail()) if part)

    def usage(self, log_text: str) -> AgentUsage:
        for item in reversed(json_objects(log_text)):
            if item.get("type") != "result":
                continue
            usage = item.get("usage") if isinstance(item.get("usage"), dict) else {}
            return AgentUsage(
                cost_usd=item.get("total_cost_usd"),
                input_tokens=usage.get("input_tokens"),
                output_tokens=usage.get("output_tokens"),
                cache_read_tokens=usage.get("cache_read_input_tokens"),
                cache_write_tokens=usage.get("cache_creation_input_tokens"),
                turns=item.get("num_turns"),
                source="claude --output-format stream-json result",
            )
        return AgentUsage()

    def agent_error(self, log_text: str, exit_code: int | None) -> AgentError | None:
        """Its JSON result with `is_error`: `api_error_status` (None when no HTTP answer came), `terminal_reason`
        `max_turns` (its `errors` say which limit), `stop_reason` `refusal`; `result` is its own message."""
        for item in reversed(json_objects(log_text)):
            if item.get("type") != "result" or not item.get("is_error"):
                continue
            errors = item.get("errors") if isinstance(item.get("errors"), list) else []
            said = item.get("result") or (errors[0] if errors else None) or item.get("subtype") or "error"
            message = f"claude: {' '.join(str(said).split())[:300]}"
            status = item.get("api_error_status")
            status = status if isinstance(status, int) and not isinstance(status, bool) else None
            if item.get("terminal_reason") == "max_turns" or item.get("subtype") == "error_max_turns":
                return AgentError(AgentErrorKind.MAX_TURNS, message)
            if item.get("stop_reason") == "refusal":
                return AgentError(AgentErrorKind.REFUSAL, message)
            return AgentError(http_kind(status, message), message, status)
        return claude_retrying(json_objects(log_text)) or super().agent_error(log_text, exit_code)

    def model_answered(self, log_text: str) -> bool | None:
        return claude_answered(json_objects(log_text))

    def retry_span_s(self) -> float:
        inherited = worker_names(self.credentials, self.config.pass_env)
        return claude_backoff(self.environment(), inherited).span_s()

    # One retry would make a refused key take minutes (Claude Code backs off between tries).
    probe_env = {"CLAUDE_CODE_MAX_RETRIES": "0"}

    def probe_words(self) -> list[str] | None:
        """One short answer, no tools, its own short system prompt (a few tokens: not its worker's 20,000),
        not saved as a session; the worker's model and extra arguments."""
        words = [self.executable, "-p", PROBE_ASK, "--output-format", "json",
                 "--tools", "", "--system-prompt", "You check that this connection works.",
                 "--no-session-persistence"]
        return [*words, *(["--model", self.config.model] if self.config.model else []), *self.config.args]


class CodexLauncher(Launcher):
    """Codex non-interactive: workspace-write sandbox, JSONL events, last message to a file."""

    name = "codex"
    default_executable = "codex"
    credentials = ("OPENAI_API_KEY", "CODEX_*")
    status_command = ("login", "status")
    login_fix = f"set OPENAI_API_KEY where orchard runs; {OWN_HOME}"
    default_base_url = "https://api.openai.com/v1"
    base_url_variable = "OPENAI_BASE_URL"

    def login_state(self, answer: CliAnswer) -> LoginState:
        """`codex login status` says "Not logged in" (exit 1), or how it is logged in (exit 0), after any warnings."""
        if any(line.strip() == "Not logged in" for line in answer.output.splitlines()):
            return LoginState.LOGGED_OUT
        return LoginState.LOGGED_IN if answer.exit_code == 0 else LoginState.UNKNOWN

    def writes(self, context: LaunchContext) -> tuple[Path, ...]:
        return (context.log_dir / f"{context.experiment.name}.last-message.md",)

    def command(self, context: LaunchContext) -> str:
        """Inside orchard's sandbox, Codex's own (a bubblewrap of its own) cannot start: `bwrap: setting up uid
        map: Operation not permitted` for every command it runs; orchard's confines it instead."""
        (last_message,) = self.writes(context)
        words = [self.executable, "exec", "--skip-git-repo-check", "--json", "-o", str(last_message)]
        if context.sandbox == SandboxMode.BWRAP:
            words += ["--sandbox", "danger-full-access"]
        else:
            words += ["--sandbox", "workspace-write", "--add-dir", str(context.paths.bench_dir)]
        tail = self._tail()
        words += self._settings()
        return " ".join(part for part in (join_words(words), tail, prompt_arg(context.paths.prompt_file)) if part)

    def _settings(self, retries: bool = True) -> list[str]:
        """`-c` settings: its endpoint as a model provider of its own (Codex reads a custom base URL only from its
        config; `retries` False: none, as Codex retries even a refused key five times); under `api`, no update
        check or analytics the proxy would refuse."""
        words = [word for key in CODEX_QUIET for word in ("-c", key)] if self.config.network == Network.API else []
        if self.config.base_url:
            no_retry = "" if retries else ", request_max_retries = 0, stream_max_retries = 0"
            provider = (f'{{name = "orchard", base_url = {json.dumps(self.config.base_url)}, '
                        f'env_key = "OPENAI_API_KEY", wire_api = "responses"{no_retry}}}')
            words += ["-c", "model_provider=orchard", "-c", f"model_providers.orchard={provider}"]
        return words

    def probe_words(self) -> list[str] | None:
        """One short answer, nothing saved (`--ephemeral`); its worker's endpoint, model and extra arguments.
        `read-only`: no command is run, so Codex's own sandbox (which cannot nest in orchard's) never starts."""
        words = [self.executable, "exec", "--skip-git-repo-check", "--json", "--ephemeral", "--sandbox", "read-only",
                 *self._settings(retries=False)]
        return [*words, *(["--model", self.config.model] if self.config.model else []), *self.config.args, PROBE_ASK]

    def usage(self, log_text: str) -> AgentUsage:
        turns = [item for item in json_objects(log_text) if item.get("type") == "turn.completed"]
        usages = [item["usage"] for item in turns if isinstance(item.get("usage"), dict)]
        if not usages:
            return AgentUsage()

        def total(key: str) -> int | None:
            values = [u[key] for u in usages if isinstance(u.get(key), int)]
            return sum(values) if values else None

        return AgentUsage(
            input_tokens=total("input_tokens"),
            output_tokens=total("output_tokens"),
            cache_read_tokens=total("cached_input_tokens"),
            cache_write_tokens=total("cache_write_input_tokens"),  # Codex 0.171.0 prints it (0 so far)
            turns=len(turns),
            source="codex exec --json turn.completed events",
        )

    def priced(self, usage: AgentUsage, prices: Mapping[str, ModelPrice]) -> AgentUsage:
        """Codex prints tokens and no cost: its model's price (config/prices.py) makes an estimate of it."""
        return estimate(usage, price_of(self.config.model, prices))

    def agent_error(self, log_text: str, exit_code: int | None) -> AgentError | None:
        for item in reversed(json_objects(log_text)):
            if item.get("type") == "turn.completed":  # its last turn worked: an error before it was retried
                break
            error = item.get("error") if item.get("type") == "turn.failed" else item
            if item.get("type") in ("error", "turn.failed") and isinstance(error, dict):
                said = str(error.get("message") or "error")
                status = _CODEX_STATUS.search(said)  # "unexpected status 401 Unauthorized: ..."
                code = int(status.group(1)) if status else None
                message = f"codex: {' '.join(said.split())[:300]}"
                return AgentError(http_kind(code, message), message, code)
        return super().agent_error(log_text, exit_code)

    def model_answered(self, log_text: str) -> bool | None:
        return codex_answered(json_objects(log_text))

    def retry_span_s(self) -> float:
        return codex_span_s()


class CursorLauncher(Launcher):
    """Cursor's agent in print mode, every action allowed, JSON result (no usage reported)."""

    name = "cursor"
    default_executable = "agent"
    credentials = ("CURSOR_API_KEY",)

    def command(self, context: LaunchContext) -> str:
        words = [self.executable, "--print", "--force", "--trust", "--output-format", "json"]
        tail = self._tail()
        return " ".join(part for part in (join_words(words), tail, prompt_arg(context.paths.prompt_file)) if part)
