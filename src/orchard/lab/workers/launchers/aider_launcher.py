"""The aider launcher: one message from the prompt file, every question answered yes, no commits.

aider (PyPI aider-chat, checked: 0.86.2 against `aider --help`, recorded
under tests/lab/data/cli-help/) reaches its model through litellm, so its
endpoint is any OpenAI-compatible base URL; it prints its tokens and cost
as `Tokens: ... Cost: ...` lines, read back here.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from orchard.lab.records.agent_errors import AgentError, AgentErrorKind, http_kind
from orchard.lab.records.agent_usage import AgentUsage
from orchard.lab.records.network import Network
from orchard.lab.workers.launchers.agent_launchers import PROBE_ASK
from orchard.lab.workers.launchers.launcher_base import LaunchContext, Launcher, join_words

AIDER_VERSION = "0.86.2"

# Its own traffic besides the model: update check, release notes, analytics; and plain, whole output.
AIDER_QUIET = ("--no-check-update", "--no-show-release-notes", "--no-analytics", "--no-pretty", "--no-stream")
AIDER_CACHE = Path(".aider/caches/model_prices_and_context_window.json")
AIDER_CACHE_NOTE = '{"orchard": "network = api: not fetched, litellm reads the list it ships"}'
_AIDER_ERROR = re.compile(r"^litellm\.(\w+): (.+)$", re.MULTILINE)
# litellm's exceptions (OpenAI's names) by the HTTP status they stand for; a connection error has none
LITELLM_STATUS = {"BadRequestError": 400, "AuthenticationError": 401, "PermissionDeniedError": 403,
                  "NotFoundError": 404,
                  "RateLimitError": 429, "InternalServerError": 500, "BadGatewayError": 502,
                  "ServiceUnavailableError": 503}
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
    base_url_variable = "OPENAI_API_BASE"

    def environment(self) -> dict[str, str]:
        """Its messages unwrapped (aider wraps them at the terminal's width: an error is read as one line); under
        `api`, litellm's price list is not fetched from the internet: the copy it ships is read."""
        values = {"COLUMNS": "2000"}
        return values | ({"LITELLM_LOCAL_MODEL_COST_MAP": "True"} if self.config.network == Network.API else {})

    def prelude(self) -> str:
        """Under `api`, aider's own copy of that price list (fetched from GitHub whenever its cache in HOME, a new
        one for each worker, is empty) is found already cached, holding nothing: aider asks litellm's."""
        if self.config.network != Network.API:
            return ""
        return (f'mkdir -p "$HOME/{AIDER_CACHE.parent}" && printf %s {shlex.quote(AIDER_CACHE_NOTE)} '
                f'> "$HOME/{AIDER_CACHE}" && ')

    def probe_words(self) -> list[str] | None:
        """One short message, outside any git repository, nothing kept; its worker's endpoint, model and extra
        arguments."""
        words = [self.executable, "--message", PROBE_ASK, "--yes-always", "--no-git", *AIDER_QUIET,
                 "--no-restore-chat-history", "--input-history-file", "/dev/null", "--chat-history-file", "/dev/null"]
        return [*words, *self._endpoint(), *(["--model", self.config.model] if self.config.model else []),
                *self.config.args]

    def _endpoint(self) -> list[str]:
        """An OpenAI-compatible endpoint (chat completions), when `base_url` names one."""
        return ["--openai-api-base", self.config.base_url] if self.config.base_url else []

    def agent_error(self, log_text: str, exit_code: int | None) -> AgentError | None:
        """aider prints litellm's exception (`litellm.AuthenticationError: ...`) and goes on, exit 0; the last one
        it printed is its error. (litellm 1.x reports a 404 "model does not exist" as BadRequestError: other.)"""
        found = list(_AIDER_ERROR.finditer(log_text))
        if not found or _AIDER_TOKENS.search(log_text, found[-1].end()):  # a reply came after it: retried, worked
            return super().agent_error(log_text, exit_code)
        name, said = found[-1].group(1), " ".join(found[-1].group(2).split())
        message = f"aider: {name}: {said}"[:300]
        if http_kind(None, message) == AgentErrorKind.UNREACHABLE:  # no HTTP answer, whatever the class says
            return AgentError(AgentErrorKind.UNREACHABLE, message)
        status = LITELLM_STATUS.get(name)
        return AgentError(http_kind(status, message), message, status)

    def model_answered(self, log_text: str) -> bool | None:
        """aider prints a `Tokens:` line for every answer of its model."""
        return _AIDER_TOKENS.search(log_text) is not None

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
            *AIDER_QUIET,
            "--input-history-file",
            str(input_history),
            "--chat-history-file",
            str(chat_history),
        ]
        words += self._endpoint()
        for entry in context.experiment.hypothesis.scope:
            if (context.paths.target_dir / entry).is_file():
                words += ["--file", entry]
        # aider never edits a file git ignores unless it is in the chat, and the report is ignored in the checkout
        # ("Skipping edits to .orchard-report.json that matches gitignore spec", aider 0.86.2)
        words += ["--add-gitignore-files", "--file", str(context.paths.report)]
        return self.prelude() + " ".join(part for part in (join_words(words), self._tail()) if part)

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
