"""What one model request asked and what the script answers, independent of the wire format.

Each wire module (`anthropic.py`, and one per OpenAI format) turns its JSON
body into an `Asked` and a `Reply` into its JSON body or its event stream;
the script (`script.py`) only ever sees these two records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolCall:
    """One tool the model calls: its name and its input, as the CLI's own tool schema wants it."""

    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class Usage:
    """Tokens the reply claims, which the CLI turns into its usage and cost."""

    input_tokens: int = 1200
    output_tokens: int = 80
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0


@dataclass(frozen=True)
class Asked:
    """What the CLI sent in one request, as the script matches on it."""

    wire: str  # "anthropic", "responses", "chat"
    model: str
    stream: bool
    system: str  # the system prompt, its text parts joined
    prompt: str  # the first user message's text
    tool_result: str | None  # the text of the latest tool result in the last message, if any
    turn: int  # 1 for the first request of a conversation, +1 per assistant message before it
    tools: tuple[str, ...]  # the tool names offered


@dataclass(frozen=True)
class Reply:
    """What the script answers: text and tool calls, or an HTTP error, or a stall."""

    text: str = ""
    tools: tuple[ToolCall, ...] = ()
    stop_reason: str = ""  # empty: "tool_use" when it calls tools, else "end_turn"
    usage: Usage = field(default_factory=Usage)
    status: int = 200  # an HTTP error when not 200
    error_type: str = ""  # the error's type in its body (e.g. "rate_limit_error")
    message: str = ""  # the error's message
    stall_after: int | None = None  # stop sending after this many stream events (0: before any byte)

    @property
    def stop(self) -> str:
        return self.stop_reason or ("tool_use" if self.tools else "end_turn")
