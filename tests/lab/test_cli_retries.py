"""What each agent CLI printed when its endpoint failed (real logs of the pinned CLIs against the scripted
endpoint, tests/lab/data/agent-logs/), read as the endpoint's fault; and how long each retries on its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchard.lab.config.sections import LauncherConfig
from orchard.lab.records.agent_errors import AgentErrorKind
from orchard.lab.workers.launchers.launchers import make_launcher

LOGS = Path(__file__).parent / "data" / "agent-logs"
OVERLOADED, RATE_LIMITED = AgentErrorKind.OVERLOADED, AgentErrorKind.RATE_LIMITED


def read(name: str) -> str:
    return (LOGS / name).read_text()


@pytest.mark.parametrize(("cli", "log", "kind", "said"), [
    ("claude", "claude-2.1.332-500-storm.log", OVERLOADED, "claude: API Error: 500"),
    ("claude", "claude-2.1.332-429-storm.log", RATE_LIMITED, "claude: API Error: Request rejected (429)"),
    ("codex", "codex-0.171.0-500-storm.log", OVERLOADED, "codex: We’re currently experiencing high"),
    ("codex", "codex-0.171.0-429-storm.log", RATE_LIMITED, "codex: exceeded retry limit, last status: 429"),
])
def test_a_cli_that_gave_up_on_its_endpoint_says_so_in_its_own_words(cli: str, log: str, kind: AgentErrorKind,
                                                                     said: str) -> None:
    launcher = make_launcher(LauncherConfig(name=cli))
    error = launcher.agent_error(read(log), 1)
    assert error is not None and error.kind == kind and error.kind.endpoint_fault, error
    assert error.message.startswith(said)
    assert launcher.model_answered(read(log)) is False  # Claude's "API Error" is a <synthetic> message


@pytest.mark.parametrize(("cli", "log", "kind", "said"), [
    ("claude", "claude-2.1.332-500-storm.log", OVERLOADED, "attempt 8 of 10, the endpoint's last answer: HTTP 500"),
    ("codex", "codex-0.171.0-429-storm.log", RATE_LIMITED, "Reconnecting... 3/5"),
])
def test_a_cli_stopped_while_still_retrying_is_read_as_what_its_endpoint_answered(
    cli: str, log: str, kind: AgentErrorKind, said: str
) -> None:
    """Its log cut where the worker timeout stopped it: retrying, no result yet."""
    lines = read(log).splitlines()
    cut = next(i for i, line in enumerate(lines) if "attempt\":8," in line or "Reconnecting... 3/5" in line)
    error = make_launcher(LauncherConfig(name=cli)).agent_error("\n".join(lines[:cut + 1]), None)
    assert error is not None and error.kind == kind and said in error.message, error


def test_a_model_that_answered_is_told_from_one_that_never_did() -> None:
    claude, codex = make_launcher(LauncherConfig(name="claude")), make_launcher(LauncherConfig(name="codex"))
    assert claude.model_answered(read("claude-2.1.332-stream-json.log")) is True
    assert codex.model_answered(read("codex-0.171.0-exec-json.log")) is True
    assert claude.model_answered('{"type":"system","subtype":"init"}') is False
    assert make_launcher(LauncherConfig(name="command", template="x")).model_answered("anything") is None


def test_the_worker_timeout_holds_the_cli_own_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Claude Code's ten retries with their jitter, about 200 s; fewer when its worker is given fewer."""
    assert 190 < make_launcher(LauncherConfig(name="claude")).retry_span_s() < 210
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "2")
    passed = make_launcher(LauncherConfig(name="claude", pass_env=["CLAUDE_CODE_MAX_RETRIES"]))
    assert passed.retry_span_s() == pytest.approx((0.5 + 1.0) * 1.25)
    assert make_launcher(LauncherConfig(name="claude")).retry_span_s() > 190  # not passed: the worker's default
    assert 25 < make_launcher(LauncherConfig(name="codex")).retry_span_s() < 28  # 25 s measured: 30 requests
    assert make_launcher(LauncherConfig(name="command", template="x")).retry_span_s() == 0
