"""Launchers: the command line that starts a worker, one per agent CLI.

Each launcher renders a bash launch line from the experiment's prompt file
and paths, names the scratch files its CLI drops into the checkout (ignored
there, so they never count as changes), and reads the agent's cost and
token usage back from the worker's log where the CLI prints them.

Flags were checked against each CLI's own `--help` (recorded under
tests/data/cli-help/, which the tests compare every rendered flag against):

| launcher | CLI | version checked | how |
| --- | --- | --- | --- |
| claude | `claude` (npm @anthropic-ai/claude-code) | 2.1.332 | `claude --help` |
| codex | `codex exec` (npm @openai/codex) | 0.171.0 | `codex exec --help` |
| cursor | `agent` (Cursor's CLI) | docs only | not on npm/PyPI (no download here); flags per cursor.com/docs/cli |
| aider | `aider` (PyPI aider-chat) | 0.86.2 | `aider --help` |

`patch` runs no model: `python -m orchard.lab.patch_worker` applies the
hypothesis's ready patch, builds, tests, measures and writes the report.
`command` runs the user's template.

Each launcher declares the credentials its CLI reads (the only secrets its
worker inherits) and what it reads and writes outside its checkout, which is
all its sandbox (`sandbox.py`) lets it see besides.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

from orchard.errors import UsageError
from orchard.lab import sandbox
from orchard.lab.allowlist import worker_names
from orchard.lab.config import OFFLINE_LAUNCHERS, Config, LauncherConfig
from orchard.lab.executors import Job
from orchard.lab.experiment import (
    Commands,
    Experiment,
    ExperimentPaths,
    experiment_commands,
    experiment_paths,
    render_command,
)
from orchard.lab.hypothesis import finite_number
from orchard.lab.workspace import Workspace

CLAUDE_VERSION = "2.1.332"
CODEX_VERSION = "0.171.0"
CURSOR_VERSION = "docs"  # Cursor's CLI is not obtainable here; see the module docstring
AIDER_VERSION = "0.86.2"

# Tools a Claude worker always has: read and edit files, search, and look
# at its own changes.
CLAUDE_BASE_TOOLS = ("Read", "Edit", "Write", "Grep", "Glob", "Bash(git diff *)", "Bash(git status *)")
VERSION_TIMEOUT_S = 30.0
# A shell that could not run the command at all: not executable, not found.
CANNOT_RUN = (126, 127)


@dataclass(frozen=True)
class AgentUsage:
    """Cost and tokens as the agent CLI reported them; None: not reported."""

    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    turns: int | None = None
    source: str | None = None  # what the numbers were read from

    def __post_init__(self) -> None:
        """The agent's figures as numbers: whatever else it printed there (text, nan, a list) is "not reported"."""
        for key in ("cost_usd", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "turns"):
            value = getattr(self, key)
            if value is not None and not (finite_number(value) and value >= 0):
                object.__setattr__(self, key, None)
        if self.source is not None:
            object.__setattr__(self, "source", str(self.source)[:200])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentUsage:
        return cls(**{key: data.get(key) for key in cls.__dataclass_fields__})


@dataclass(frozen=True)
class LaunchContext:
    """What a launcher renders a launch line from."""

    experiment: Experiment
    paths: ExperimentPaths
    commands: Commands
    log_dir: Path
    vcs: str  # the target's VCS kind


def _prompt_arg(prompt_file: Path) -> str:
    """The prompt file's text as one shell word, read when the line runs."""
    return f'"$(cat {shlex.quote(str(prompt_file))})"'


def _join(words: list[str]) -> str:
    return shlex.join(words)


class Launcher(ABC):
    """Renders one agent CLI's launch line and reads its usage back."""

    name: ClassVar[str] = ""
    default_executable: ClassVar[str] = ""
    scratch: ClassVar[tuple[str, ...]] = ()  # files the CLI drops into the checkout
    credentials: ClassVar[tuple[str, ...]] = ()  # variables the CLI authenticates with (`X_*`: a prefix)

    def __init__(self, config: LauncherConfig | None = None, label: str = "") -> None:
        self.config = config or LauncherConfig(name=self.name, network=self.name not in OFFLINE_LAUNCHERS)
        self.label = label or self.name  # as orchard.toml names it: "claude", or a [launchers.NAME] key

    @property
    def executable(self) -> str:
        return self.config.executable or self.default_executable

    def preflight(self) -> str | None:
        """What stops this launcher from running at all (missing CLI, a version flag that fails), or None."""
        found = shutil.which(self.executable)
        if found is None:
            return f"`{self.executable}` is not on PATH (install it, or set its `executable`)"
        try:
            answer = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S,
                                    stdin=subprocess.DEVNULL, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"`{self.executable} --version` did not answer: {error}"
        if answer.returncode != 0:
            tail = (answer.stderr or answer.stdout).strip().splitlines()[-1:] or [""]
            return f"`{self.executable} --version` exited {answer.returncode}: {tail[0][:200]}"
        return None

    def failure(self, log_text: str, exit_code: int | None) -> str | None:
        """The agent's own account of why it could not work (no credentials, no network, no CLI), or None."""
        if exit_code in CANNOT_RUN:
            lines = [line for line in log_text.splitlines() if line.strip() and not line.startswith("WORKER_DONE_")]
            return f"the launch line could not run (exit {exit_code}): {(lines[-1:] or ['no output'])[0][:300]}"
        return None

    @abstractmethod
    def command(self, context: LaunchContext) -> str:
        """The bash launch line, run in the worker's target checkout."""

    def usage(self, log_text: str) -> AgentUsage:
        """Cost and tokens from the worker's log (default: the CLI reports none)."""
        return AgentUsage()

    def _tail(self) -> str:
        """`--model` and the configured extra arguments, for CLIs that take `--model`."""
        words = ["--model", self.config.model] if self.config.model else []
        return _join(words + list(self.config.args))

    def context(self, workspace: Workspace, experiment: Experiment) -> LaunchContext:
        paths = experiment_paths(workspace, experiment)
        return LaunchContext(
            experiment, paths, experiment_commands(workspace, paths), workspace.logs_dir, workspace.config.target.vcs
        )

    def reads(self, context: LaunchContext) -> tuple[Path, ...]:
        """What the worker reads outside its checkout: its bench clone and its prompt."""
        return context.paths.bench_dir, context.paths.prompt_file

    def writes(self, context: LaunchContext) -> tuple[Path, ...]:
        """Files the CLI writes outside its checkout (default: none)."""
        return ()

    def confinement(self, workspace: Workspace, context: LaunchContext, *, cwd: Path, own: list[Path], home: Path,
                    tmp: Path, reads: tuple[Path, ...] = (), path: str | None = None) -> sandbox.Confinement:
        """Its sandbox: writable `own` dirs, private `home` and `tmp`, what it reads and writes, its credentials."""
        return sandbox.worker_confinement(
            workspace.config.workers.sandbox, workspace=workspace.root, cwd=cwd, network=self.config.network,
            inherit=worker_names(self.credentials, self.config.pass_env), home=home, tmp=tmp,
            reads=(*self.reads(context), *reads), writes=self.writes(context), executable=self.executable, own=own,
            extra_reads=workspace.config.workers.sandbox_read, path=path)

    def job(self, workspace: Workspace, experiment: Experiment, env: dict[str, str] | None = None) -> Job:
        """The executor job for `experiment`: its launch line, run sandboxed in its target checkout."""
        context = self.context(workspace, experiment)
        paths, worker = context.paths, experiment.checkout.worker
        own = [paths.target_dir] + ([] if paths.target_dir in paths.report.parents else [paths.report.parent])
        confinement = self.confinement(workspace, context, cwd=paths.target_dir, own=own, home=worker.home_dir,
                                       tmp=worker.tmp_dir, path=(env or {}).get("PATH"))
        return Job(
            name=experiment.name,
            command=self.command(context),
            cwd=paths.target_dir,
            log_path=paths.log_file,
            timeout_s=workspace.config.workers.timeout_minutes * 60.0,
            env=dict(env or {}),
            sandbox=confinement,
        )


def _json_objects(log_text: str) -> list[dict[str, Any]]:
    """Every line of the log that is a JSON object."""
    found = []
    for line in log_text.splitlines():
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                found.append(value)
    return found


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

    def allowed_tools(self, commands: Commands) -> list[str]:
        if self.config.allowed_tools:
            return list(self.config.allowed_tools)
        return [*CLAUDE_BASE_TOOLS, *_shell_tools(commands)]

    def command(self, context: LaunchContext) -> str:
        tools = ",".join(self.allowed_tools(context.commands))
        # The prompt goes right after -p: --allowedTools and --add-dir take
        # several values and would swallow a prompt placed after them.
        head = f"{shlex.quote(self.executable)} -p {_prompt_arg(context.paths.prompt_file)}"
        words = [
            "--output-format",
            "json",
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            tools,
            "--add-dir",
            str(context.paths.bench_dir),
        ]
        return " ".join(part for part in (head, _join(words), self._tail()) if part)

    def usage(self, log_text: str) -> AgentUsage:
        for item in reversed(_json_objects(log_text)):
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
                source="claude --output-format json result",
            )
        return AgentUsage()

    def failure(self, log_text: str, exit_code: int | None) -> str | None:
        for item in reversed(_json_objects(log_text)):
            if item.get("type") == "result" and item.get("is_error"):
                return f"claude: {str(item.get('result') or item.get('subtype') or 'error')[:300]}"
        return super().failure(log_text, exit_code)


class CodexLauncher(Launcher):
    """Codex non-interactive: workspace-write sandbox, JSONL events, last message to a file."""

    name = "codex"
    default_executable = "codex"
    credentials = ("OPENAI_API_KEY", "CODEX_*")

    def writes(self, context: LaunchContext) -> tuple[Path, ...]:
        return (context.log_dir / f"{context.experiment.name}.last-message.md",)

    def command(self, context: LaunchContext) -> str:
        (last_message,) = self.writes(context)
        words = [
            self.executable,
            "exec",
            "--sandbox",
            "workspace-write",
            "--skip-git-repo-check",
            "--json",
            "-o",
            str(last_message),
            "--add-dir",
            str(context.paths.bench_dir),
        ]
        tail = self._tail()
        return " ".join(part for part in (_join(words), tail, _prompt_arg(context.paths.prompt_file)) if part)

    def usage(self, log_text: str) -> AgentUsage:
        turns = [item for item in _json_objects(log_text) if item.get("type") == "turn.completed"]
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
            turns=len(turns),
            source="codex exec --json turn.completed events",
        )

    def failure(self, log_text: str, exit_code: int | None) -> str | None:
        for item in reversed(_json_objects(log_text)):
            error = item.get("error") if item.get("type") == "turn.failed" else item
            if item.get("type") in ("error", "turn.failed") and isinstance(error, dict):
                return f"codex: {str(error.get('message') or 'error')[:300]}"
        return super().failure(log_text, exit_code)


class CursorLauncher(Launcher):
    """Cursor's agent in print mode, every action allowed, JSON result (no usage reported)."""

    name = "cursor"
    default_executable = "agent"
    credentials = ("CURSOR_API_KEY",)

    def command(self, context: LaunchContext) -> str:
        words = [self.executable, "--print", "--force", "--trust", "--output-format", "json"]
        tail = self._tail()
        return " ".join(part for part in (_join(words), tail, _prompt_arg(context.paths.prompt_file)) if part)


_AIDER_TOKENS = re.compile(r"^Tokens: (.+?)\.(?: Cost: \$([\d.]+) message, \$([\d.]+) session\.)?\s*$", re.MULTILINE)


def _aider_count(text: str) -> int:
    text = text.strip().lower()
    scale = 1_000 if text.endswith("k") else 1_000_000 if text.endswith("m") else 1
    return round(float(text.rstrip("km")) * scale)


class AiderLauncher(Launcher):
    """aider, one message from the prompt file, every question answered yes, no commits."""

    name = "aider"
    default_executable = "aider"
    scratch = (".aider*",)
    # aider's own settings and the model services it reaches through litellm
    credentials = ("AIDER_*", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "DEEPSEEK_API_KEY",
                   "OPENROUTER_API_KEY")

    def writes(self, context: LaunchContext) -> tuple[Path, ...]:
        logs, name = context.log_dir, context.experiment.name
        return logs / f"{name}.aider.input.history", logs / f"{name}.aider.chat.history.md"

    def command(self, context: LaunchContext) -> str:
        input_history, chat_history = self.writes(context)
        words = [
            self.executable,
            "--message-file",
            str(context.paths.prompt_file),
            "--yes-always",
            "--no-auto-commits",
            "--no-dirty-commits",
            "--no-gitignore",
            "--no-check-update",
            "--no-show-release-notes",
            "--no-analytics",
            "--no-pretty",
            "--no-stream",
            "--input-history-file",
            str(input_history),
            "--chat-history-file",
            str(chat_history),
        ]
        for entry in context.experiment.hypothesis.scope:
            if (context.paths.target_dir / entry).is_file():
                words += ["--file", entry]
        return " ".join(part for part in (_join(words), self._tail()) if part)

    def usage(self, log_text: str) -> AgentUsage:
        """aider prints `Tokens: 2.1k sent, 340 received. Cost: $0.01 message, $0.03 session.`"""
        sent = received = cache_read = cache_write = 0
        session_cost: float | None = None
        matches = list(_AIDER_TOKENS.finditer(log_text))
        if not matches:
            return AgentUsage()
        for match in matches:
            for item in match.group(1).split(", "):
                count, _, label = item.partition(" ")
                try:
                    value = _aider_count(count)
                except ValueError:
                    continue
                if label == "sent":
                    sent += value
                elif label == "received":
                    received += value
                elif label == "cache hit":
                    cache_read += value
                elif label == "cache write":
                    cache_write += value
            if match.group(3):
                session_cost = float(match.group(3))
        return AgentUsage(
            cost_usd=session_cost,
            input_tokens=sent,
            output_tokens=received,
            cache_read_tokens=cache_read or None,
            cache_write_tokens=cache_write or None,
            turns=len(matches),
            source="aider 'Tokens: ... Cost: ...' lines (k-rounded as printed)",
        )


class PatchLauncher(Launcher):
    """No model: apply the hypothesis's ready patch, then build, test, measure, report."""

    name = "patch"
    default_executable = sys.executable

    def preflight(self) -> str | None:
        return None  # this Python, always there

    def patch_file(self, workspace_root: Path, experiment: Experiment) -> Path:
        patch = experiment.hypothesis.patch
        if not patch:
            raise UsageError(
                f"experiment {experiment.name!r}: the patch launcher needs a hypothesis with a ready `patch` file"
            )
        path = Path(patch) if Path(patch).is_absolute() else workspace_root / patch
        if not path.is_file():
            raise UsageError(f"experiment {experiment.name!r}: patch file {path} does not exist")
        return path

    def reads(self, context: LaunchContext) -> tuple[Path, ...]:
        """Besides the bench and the prompt: the ready patch (and a bench patch)."""
        root, hypothesis = context.paths.workspace, context.experiment.hypothesis
        bench_patch = [root / hypothesis.bench_patch] if hypothesis.bench_patch else []
        return *super().reads(context), self.patch_file(root, context.experiment), *bench_patch

    def command(self, context: LaunchContext) -> str:
        words = [
            self.executable,
            "-m",
            "orchard.lab.patch_worker",
            "--experiment",
            context.experiment.name,
            "--patch",
            str(self.patch_file(context.paths.workspace, context.experiment)),
            "--target",
            str(context.paths.target_dir),
            "--bench",
            str(context.paths.bench_dir),
            "--report",
            str(context.paths.report),
            "--vcs",
            context.vcs,
            "--build",
            context.commands.build,
            "--test",
            context.commands.test,
            "--measure",
            context.commands.measure,
        ]
        if context.experiment.hypothesis.bench_patch:
            words += ["--bench-patch", context.experiment.hypothesis.bench_patch]
        return _join(words)


class CommandLauncher(Launcher):
    """The user's own template from orchard.toml."""

    name = "command"

    def preflight(self) -> str | None:
        """The template's program must exist; a template starting with a placeholder or a shell word is not checked."""
        try:
            first = shlex.split(self.config.template)[0]
        except (ValueError, IndexError):
            return f"template {self.config.template!r} is not a shell command"
        if "{" in first or "=" in first or shutil.which(first) is not None or first in SHELL_WORDS:
            return None
        return f"`{first}` (the template's program) is not on PATH"

    def command(self, context: LaunchContext) -> str:
        if not self.config.template:
            raise UsageError("launcher.template: the command launcher needs a template")
        return render_command(self.config.template, context.paths.placeholders())


LAUNCHERS: dict[str, type[Launcher]] = {
    cls.name: cls
    for cls in (ClaudeLauncher, CodexLauncher, CursorLauncher, AiderLauncher, PatchLauncher, CommandLauncher)
}


SHELL_WORDS = ("cd", "exec", "set", "export", "if", "for", "while", "(", "{", "!", "true", ":", "echo", "test")


def make_launcher(config: LauncherConfig, label: str = "") -> Launcher:
    """The launcher orchard.toml's [launcher] section (or a [launchers.NAME] table) names."""
    try:
        return LAUNCHERS[config.name](config, label)
    except KeyError:
        raise UsageError(f"launcher.name: unknown launcher {config.name!r}; known: "
                         f"{', '.join(LAUNCHERS)}") from None


def launcher_for(config: Config, name: str = "") -> Launcher:
    """The launcher a hypothesis names (a [launchers.NAME] table); empty: the lab's default [launcher]."""
    if not name:
        return make_launcher(config.launcher)
    if name not in config.launchers:
        defined = ", ".join(config.launchers) or "none"
        raise UsageError(f"launcher {name!r} is not defined in orchard.toml (defined [launchers.NAME]: {defined}); "
                         "add the table or leave the hypothesis's launcher empty for the default")
    return make_launcher(config.launchers[name], name)


def preflight(config: Config) -> None:
    """The sandbox works and every configured launcher can run (its CLI answers `--version`).

    UsageError naming each problem.
    """
    sandbox.preflight(config.workers.sandbox)
    launchers = [make_launcher(config.launcher), *(launcher_for(config, name) for name in config.launchers)]
    problems = [f"launcher {launcher.label!r}: {problem}" for launcher in launchers
                if (problem := launcher.preflight()) is not None]
    if problems:
        raise UsageError("; ".join(problems) + "; no hypothesis was touched")
