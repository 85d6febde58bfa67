"""What an agent CLI does on its own when its endpoint fails: how long it retries, what it prints meanwhile, and
whether its model answered at all.

A worker's timeout is `[workers] timeout_minutes` plus its CLI's retry span, so a CLI still retrying a 500 or a
429 is never taken for a hung one. The spans come from each CLI's own backoff (measured with the pinned versions
against the scripted endpoint: tests/agents/test_endpoint_faults.py):

| CLI | retries (setting, default) | delay before retry n | span at the default |
| --- | --- | --- | --- |
| Claude Code 2.1.332 | `CLAUDE_CODE_MAX_RETRIES`, 10 | 0.5 s * 2^(n-1), at most 32 s, up to 25% more | about 200 s |
| Codex 0.171.0 | `stream_max_retries` 5, each of `request_max_retries` 4 | 0.2 s * 2^(n-1), 10% more | about 27 s |

A request that hangs is not counted: its worker ends with no answer from its model, which is the endpoint's fault
however long it waited (`loop/agent_retry.py`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from orchard.lab.records.agent_errors import AgentError, AgentErrorKind, http_kind


@dataclass(frozen=True)
class Backoff:
    """One CLI's retries: how many, the first delay, the longest, the jitter it may add on top."""

    retries: int
    first_s: float
    cap_s: float
    jitter: float

    def span_s(self) -> float:
        """The longest its retries can wait in all."""
        return sum(min(self.first_s * 2.0 ** n, self.cap_s) for n in range(self.retries)) * (1.0 + self.jitter)


CLAUDE_RETRIES = "CLAUDE_CODE_MAX_RETRIES"
CLAUDE_DEFAULT = Backoff(retries=10, first_s=0.5, cap_s=32.0, jitter=0.25)
CODEX_STREAM = Backoff(retries=5, first_s=0.2, cap_s=float("inf"), jitter=0.1)
CODEX_REQUEST = Backoff(retries=4, first_s=0.2, cap_s=float("inf"), jitter=0.1)


def codex_span_s() -> float:
    """Codex's reconnects of its stream, each of them retrying its request (30 requests for one turn of 500s)."""
    return (CODEX_STREAM.retries + 1) * CODEX_REQUEST.span_s() + CODEX_STREAM.span_s()


def claude_backoff(setenv: dict[str, str], inherited: tuple[str, ...]) -> Backoff:
    """Claude Code's backoff as its worker gets it: CLAUDE_CODE_MAX_RETRIES set by the launcher or passed through
    from orchard's environment, else its default."""
    value = setenv.get(CLAUDE_RETRIES) or (os.environ.get(CLAUDE_RETRIES) if CLAUDE_RETRIES in inherited else None)
    try:
        retries = int(value) if value is not None else CLAUDE_DEFAULT.retries
    except ValueError:
        retries = CLAUDE_DEFAULT.retries
    return Backoff(max(retries, 0), CLAUDE_DEFAULT.first_s, CLAUDE_DEFAULT.cap_s, CLAUDE_DEFAULT.jitter)


def claude_retrying(items: list[dict[str, Any]]) -> AgentError | None:
    """Claude Code's last words, when it was still retrying (a `system` `api_retry` event with no result after
    it): what the endpoint answered."""
    said = [item for item in items if item.get("type") in ("system", "assistant", "user", "result")]
    last = said[-1] if said else {}
    if last.get("type") != "system" or last.get("subtype") != "api_retry":
        return None
    status = last.get("error_status")
    status = status if isinstance(status, int) and not isinstance(status, bool) else None
    answered = f"HTTP {status} {last.get('error') or ''}".strip() if status else "no answer"
    message = (f"claude: still retrying when stopped (attempt {last.get('attempt')} of {last.get('max_retries')}, "
               f"the endpoint's last answer: {answered})")
    return AgentError(http_kind(status, message) if status else AgentErrorKind.UNREACHABLE, message, status)


def _table(item: dict[str, Any], key: str) -> dict[str, Any]:
    value = item.get(key)
    return value if isinstance(value, dict) else {}


def claude_answered(items: list[dict[str, Any]]) -> bool:
    """Whether Claude Code's model answered: an assistant message of its own (an API error is shown as one from
    the `<synthetic>` model) or tokens in its result."""
    for item in items:
        if item.get("type") == "assistant" and _table(item, "message").get("model") != "<synthetic>":
            return True
        usage = _table(item, "usage") if item.get("type") == "result" else {}
        if any(isinstance(count, int) and count > 0 for count in (usage.get("input_tokens"),
                                                                   usage.get("output_tokens"))):
            return True
    return False


def codex_answered(items: list[dict[str, Any]]) -> bool:
    """Whether Codex's model answered: a completed turn, or an item that is not one of Codex's own errors."""
    for item in items:
        if item.get("type") == "turn.completed" or (item.get("type") == "item.completed"
                                                    and _table(item, "item").get("type") != "error"):
            return True
    return False
