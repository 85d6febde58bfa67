"""The Anthropic Messages API (`POST /v1/messages`), as Claude Code speaks it: JSON or a stream of events.

A streamed reply is `message_start`, per content block `content_block_start`,
one `content_block_delta` (`text_delta` or `input_json_delta`) and
`content_block_stop`, then `message_delta` (stop reason, output tokens) and
`message_stop`, each as a server-sent event.
"""

from __future__ import annotations

import json
from typing import Any

from tests.agents.endpoint.exchange import Asked, Reply

PATHS = ("/v1/messages",)
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
               503: "overloaded_error", 529: "overloaded_error"}


def _text(content: Any) -> str:
    """The text of a message's content: a string, or its text blocks joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(block.get("text") if block.get("type") == "text" else block.get("content", ""))
                         for block in content if isinstance(block, dict) and block.get("type") in ("text",
                                                                                                  "tool_result"))
    return ""


def parse(body: dict[str, Any]) -> Asked:
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    users = [m for m in messages if m.get("role") == "user"]
    last = messages[-1].get("content") if messages else None
    results = [block for block in last if isinstance(block, dict) and block.get("type") == "tool_result"] \
        if isinstance(last, list) else []
    return Asked(
        wire="anthropic",
        model=str(body.get("model", "")),
        stream=bool(body.get("stream")),
        system=_text(body.get("system", "")),
        prompt=_text(users[0].get("content")) if users else "",
        tool_result=_text(results[-1].get("content", "")) if results else None,
        turn=1 + sum(1 for m in messages if m.get("role") == "assistant"),
        tools=tuple(str(t.get("name")) for t in body.get("tools", []) if isinstance(t, dict)),
    )


def _blocks(reply: Reply, ids: str) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    blocks += [{"type": "tool_use", "id": f"toolu_{ids}_{n}", "name": call.name, "input": call.input}
               for n, call in enumerate(reply.tools)]
    return blocks


def _usage(reply: Reply) -> dict[str, int]:
    usage = reply.usage
    return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
            "cache_creation_input_tokens": usage.cache_creation_input_tokens,
            "cache_read_input_tokens": usage.cache_read_input_tokens}


def message(reply: Reply, asked: Asked, ids: str) -> dict[str, Any]:
    """The whole reply as one JSON message (a request without `stream`)."""
    return {"id": f"msg_{ids}", "type": "message", "role": "assistant", "model": asked.model,
            "content": _blocks(reply, ids), "stop_reason": reply.stop, "stop_sequence": None,
            "usage": _usage(reply)}


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()


def events(reply: Reply, asked: Asked, ids: str) -> list[bytes]:
    """The reply as the stream of server-sent events a `stream: true` request gets."""
    start = {**message(reply, asked, ids), "content": [], "stop_reason": None,
             "usage": {**_usage(reply), "output_tokens": 1}}
    out = [_event("message_start", {"message": start})]
    for index, block in enumerate(_blocks(reply, ids)):
        opened: dict[str, Any]
        delta: dict[str, Any]
        if block["type"] == "text":
            opened, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        else:
            opened = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        out += [_event("content_block_start", {"index": index, "content_block": opened}),
                _event("content_block_delta", {"index": index, "delta": delta}),
                _event("content_block_stop", {"index": index})]
    out += [_event("message_delta", {"delta": {"stop_reason": reply.stop, "stop_sequence": None},
                                     "usage": {"output_tokens": reply.usage.output_tokens}}),
            _event("message_stop", {})]
    return out


def error(reply: Reply) -> dict[str, Any]:
    """An HTTP error's body."""
    kind = reply.error_type or ERROR_TYPES.get(reply.status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": reply.message or kind}}
