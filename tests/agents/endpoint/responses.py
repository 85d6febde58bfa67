"""The OpenAI Responses API (`POST /v1/responses`), as Codex speaks it: a stream of events, or one JSON response.

A request's `input` is a list of items: `message`s (developer, user,
assistant), the model's `function_call`s and `reasoning`, and the CLI's
`function_call_output`s; Codex also offers tools in an `additional_tools`
item besides `tools`. A streamed reply is `response.created`, per output
item `response.output_item.added`, its delta (`response.output_text.delta`
or `response.function_call_arguments.delta`) and `response.output_item.done`,
then `response.completed` with the usage, each as a server-sent event.
"""

from __future__ import annotations

import json
from typing import Any

from tests.agents.endpoint.exchange import Asked, Reply

PATHS = ("/v1/responses", "/responses")
MODEL_ITEMS = ("function_call", "custom_tool_call", "reasoning", "local_shell_call")
OUTPUT_ITEMS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_api_key", 403: "permission_denied", 404: "model_not_found",
               429: "rate_limit_exceeded", 500: "server_error", 503: "server_is_overloaded"}


def text_of(content: Any) -> str:
    """A message's or a tool output's text: a string, or its text parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _tool_names(tools: Any) -> list[str]:
    names: list[str] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            names += _tool_names(tool.get("tools"))
        elif tool.get("name") or tool.get("type"):
            names.append(str(tool.get("name") or tool.get("type")))
    return names


def _turn(items: list[dict[str, Any]]) -> int:
    """1 + the model's earlier answers: each run of model items (an assistant message, calls) is one."""
    turns, inside = 0, False
    for item in items:
        model = item.get("type") in MODEL_ITEMS or (item.get("type") == "message" and item.get("role") == "assistant")
        turns += model and not inside
        inside = model
    return turns + 1


def parse(body: dict[str, Any]) -> Asked:
    items = [item for item in body.get("input", []) if isinstance(item, dict)]
    if isinstance(body.get("input"), str):
        items = [{"type": "message", "role": "user", "content": body["input"]}]
    messages = [item for item in items if item.get("type", "message") == "message"]
    system = [str(body.get("instructions") or "")] + [text_of(m.get("content")) for m in messages
                                                      if m.get("role") in ("developer", "system")]
    tools = _tool_names(body.get("tools"))
    for item in items:
        if item.get("type") == "additional_tools":
            tools += _tool_names(item.get("tools"))
    last = items[-1] if items else {}
    return Asked(
        wire="responses",
        model=str(body.get("model", "")),
        stream=bool(body.get("stream")),
        system="\n".join(part for part in system if part),
        prompt="\n".join(text_of(m.get("content")) for m in messages if m.get("role") == "user"),
        tool_result=text_of(last.get("output")) if last.get("type") in OUTPUT_ITEMS else None,
        turn=_turn(items),
        tools=tuple(tools),
    )


def _items(reply: Reply, ids: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.text:
        items.append({"type": "message", "id": f"msg_{ids}", "role": "assistant", "status": "completed",
                      "content": [{"type": "output_text", "text": reply.text, "annotations": []}]})
    items += [{"type": "function_call", "id": f"fc_{ids}_{n}", "call_id": f"call_{ids}_{n}", "name": call.name,
               "arguments": json.dumps(call.input), "status": "completed"} for n, call in enumerate(reply.tools)]
    return items


def _usage(reply: Reply) -> dict[str, Any]:
    usage = reply.usage
    return {"input_tokens": usage.input_tokens,
            "input_tokens_details": {"cached_tokens": usage.cache_read_input_tokens},
            "output_tokens": usage.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.input_tokens + usage.output_tokens}


def message(reply: Reply, asked: Asked, ids: str) -> dict[str, Any]:
    """The whole reply as one response object (a request without `stream`)."""
    return {"id": f"resp_{ids}", "object": "response", "status": "completed", "model": asked.model,
            "output": _items(reply, ids), "usage": _usage(reply)}


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()


def events(reply: Reply, asked: Asked, ids: str) -> list[bytes]:
    """The reply as the stream of server-sent events a `stream: true` request gets."""
    whole = message(reply, asked, ids)
    out = [_event("response.created", {"response": {**whole, "status": "in_progress", "output": [],
                                                     "usage": None}})]
    for index, item in enumerate(whole["output"]):
        if item["type"] == "message":
            opened = {**item, "status": "in_progress", "content": []}
            delta = _event("response.output_text.delta", {"item_id": item["id"], "output_index": index,
                                                          "content_index": 0, "delta": reply.text})
        else:
            opened = {**item, "status": "in_progress", "arguments": ""}
            delta = _event("response.function_call_arguments.delta", {"item_id": item["id"], "output_index": index,
                                                                     "delta": item["arguments"]})
        out += [_event("response.output_item.added", {"output_index": index, "item": opened}), delta,
                _event("response.output_item.done", {"output_index": index, "item": item})]
    return [*out, _event("response.completed", {"response": whole})]


def error(reply: Reply) -> dict[str, Any]:
    """An HTTP error's body."""
    kind = reply.error_type or ERROR_TYPES.get(reply.status, "server_error")
    return {"error": {"message": reply.message or kind, "type": kind, "code": kind, "param": None}}
