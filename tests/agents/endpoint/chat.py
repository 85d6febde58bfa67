"""OpenAI chat completions (`POST /v1/chat/completions`), as aider (through litellm) and most other CLIs speak it.

A request is `messages` (system, user, assistant, tool), the tools offered
and `stream`. A reply is one `chat.completion` (its message's text and tool
calls, `finish_reason`, `usage`), or, streamed, `chat.completion.chunk`
events ending with the usage chunk and `data: [DONE]`. aider's own few-shot
examples are assistant messages too, so a script for it matches on the
prompt, not on the turn.
"""

from __future__ import annotations

import json
import time
from typing import Any

from tests.agents.endpoint.exchange import Asked, Reply
from tests.agents.endpoint.responses import error, text_of

__all__ = ["PATHS", "error", "events", "message", "parse"]  # error: OpenAI's, the same for both its APIs

PATHS = ("/v1/chat/completions", "/chat/completions")


def parse(body: dict[str, Any]) -> Asked:
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    last = messages[-1] if messages else {}
    tools = [t.get("function", {}).get("name") for t in body.get("tools", []) if isinstance(t, dict)]
    return Asked(
        wire="chat",
        model=str(body.get("model", "")),
        stream=bool(body.get("stream")),
        system="\n".join(text_of(m.get("content")) for m in messages if m.get("role") == "system"),
        prompt="\n".join(text_of(m.get("content")) for m in messages if m.get("role") == "user"),
        tool_result=text_of(last.get("content")) if last.get("role") == "tool" else None,
        turn=1 + sum(1 for m in messages if m.get("role") == "assistant"),
        tools=tuple(str(name) for name in tools if name),
    )


def _message(reply: Reply, ids: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tools:
        message["tool_calls"] = [{"id": f"call_{ids}_{n}", "type": "function",
                                  "function": {"name": call.name, "arguments": json.dumps(call.input)}}
                                 for n, call in enumerate(reply.tools)]
    return message


def _finish(reply: Reply) -> str:
    return "tool_calls" if reply.tools else {"end_turn": "stop", "max_tokens": "length"}.get(reply.stop, reply.stop)


def _usage(reply: Reply) -> dict[str, Any]:
    usage = reply.usage
    return {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cache_read_input_tokens}}


def message(reply: Reply, asked: Asked, ids: str) -> dict[str, Any]:
    """The whole reply as one `chat.completion` (a request without `stream`)."""
    return {"id": f"chatcmpl-{ids}", "object": "chat.completion", "created": int(time.time()), "model": asked.model,
            "choices": [{"index": 0, "message": _message(reply, ids), "finish_reason": _finish(reply)}],
            "usage": _usage(reply)}


def _chunk(ids: str, asked: Asked, choices: list[dict[str, Any]], **more: Any) -> bytes:
    data = {"id": f"chatcmpl-{ids}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": asked.model, "choices": choices, **more}
    return f"data: {json.dumps(data)}\n\n".encode()


def events(reply: Reply, asked: Asked, ids: str) -> list[bytes]:
    """The reply as `chat.completion.chunk` events: the message whole in one delta, then the finish and usage."""
    delta = {**_message(reply, ids), "content": reply.text}
    if "tool_calls" in delta:
        delta["tool_calls"] = [{"index": n, **call} for n, call in enumerate(delta["tool_calls"])]
    return [_chunk(ids, asked, [{"index": 0, "delta": delta, "finish_reason": None}]),
            _chunk(ids, asked, [{"index": 0, "delta": {}, "finish_reason": _finish(reply)}]),
            _chunk(ids, asked, [], usage=_usage(reply)), b"data: [DONE]\n\n"]
