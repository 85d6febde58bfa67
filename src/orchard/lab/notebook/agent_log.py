"""A worker's log read as what its agent did: messages, tool calls and their results, the final result.

The launchers have their agents print JSON events (lab/workers/launchers/agent_launchers.py):
Claude Code's `--output-format stream-json` (one `system`, `assistant`,
`user` and `result` object a line; `json` is only the last of these), Codex's
`exec --json` (`item.started`/`item.completed` with an agent message,
a command, a file change, reasoning; `turn.completed` with its usage). aider
and a patch worker print plain text. A line that is no known event (orchard's
own lines, a CLI's warnings, aider's whole output) is kept as text, runs of
them joined: nothing in the log is dropped, only shown for what it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from orchard.lab.text import html_text as escape
from orchard.units import count, duration_ms, usd

BODY_LIMIT = 4000  # characters of one tool result or text block shown; the rest is said to be cut


class LogItemKind(StrEnum):
    MESSAGE = "message"  # the agent's own words
    THINKING = "thinking"
    TOOL_CALL = "tool-call"
    TOOL_RESULT = "tool-result"
    RESULT = "result"  # the run's end: cost, turns, the last word
    SESSION = "session"  # the agent's start: model, tools
    OUTPUT = "output"  # a line that is no agent event


@dataclass(frozen=True)
class LogItem:
    kind: LogItemKind
    title: str
    body: str = ""
    error: bool = False


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str:
    """A content field as text: a string, or a list of blocks with `text`."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_text(v.get("text", "") if isinstance(v, dict) else v) for v in value)
    return "" if value is None else json.dumps(value, ensure_ascii=False)


def _tool_input(name: str, given: Any) -> tuple[str, str]:
    """A tool call's one-line summary and its full input."""
    if not isinstance(given, dict):
        return name, _text(given)
    short = given.get("command") or given.get("file_path") or given.get("path") or given.get("pattern") or ""
    rest = {k: v for k, v in given.items() if k not in ("command", "file_path", "path")}
    body = "\n".join(f"{k}: {v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}" for k, v in rest.items())
    return f"{name} {str(short).splitlines()[0] if short else ''}".strip(), body


def _claude(item: Mapping[str, Any]) -> list[LogItem]:
    kind = item.get("type")
    if kind == "system" and item.get("subtype") != "init":  # a background task's start or end
        status = f" ({item['status']})" if item.get("status") else ""
        what = item.get("description") or item.get("summary") or ""
        return [LogItem(LogItemKind.SESSION, f"{item.get('subtype', 'system')}: {what}{status}")]
    if kind == "system":
        tools = _list(item.get("tools"))
        return [LogItem(LogItemKind.SESSION, f"session: model {item.get('model', '?')}",
                        f"tools: {', '.join(map(str, tools))}" if tools else "")]
    if kind == "result":
        said = f"cost {usd(item['total_cost_usd'])} · " if isinstance(item.get("total_cost_usd"), float | int) else ""
        took = duration_ms(item["duration_ms"]) if isinstance(item.get("duration_ms"), int | float) else "-"
        title = f"result: {item.get('subtype', '?')} · {said}{count(item.get('num_turns'))} turns · {took}"
        return [LogItem(LogItemKind.RESULT, title, _text(item.get("result")), bool(item.get("is_error")))]
    message = _dict(item.get("message"))
    content = message.get("content")
    blocks = content if isinstance(content, list) else [content]
    items = []
    for block in blocks:
        if not isinstance(block, dict):
            if block:
                items.append(LogItem(LogItemKind.MESSAGE, f"{kind}", _text(block)))
            continue
        part = block.get("type")
        if part == "text" and kind == "assistant":
            items.append(LogItem(LogItemKind.MESSAGE, "assistant", _text(block.get("text"))))
        elif part == "thinking":
            items.append(LogItem(LogItemKind.THINKING, "thinking", _text(block.get("thinking"))))
        elif part == "tool_use":
            items.append(LogItem(LogItemKind.TOOL_CALL, *_tool_input(str(block.get("name", "?")), block.get("input"))))
        elif part == "tool_result":
            failed = bool(block.get("is_error"))
            items.append(LogItem(LogItemKind.TOOL_RESULT, "tool error" if failed else "tool result",
                                 _text(block.get("content")), failed))
        elif part == "text":
            items.append(LogItem(LogItemKind.MESSAGE, str(kind), _text(block.get("text"))))
    return items


def _codex(item: Mapping[str, Any]) -> list[LogItem]:
    kind = item.get("type")
    if kind == "turn.completed":
        usage = _dict(item.get("usage"))
        return [LogItem(LogItemKind.RESULT, f"turn completed: {count(usage.get('input_tokens'))} tokens in, "
                                            f"{count(usage.get('output_tokens'))} out")]
    if kind in ("turn.failed", "error"):
        error = _dict(item.get("error")) or item
        return [LogItem(LogItemKind.RESULT, str(kind), _text(error.get("message")), True)]
    task = _dict(item.get("item"))
    what = task.get("type")
    if kind == "item.started" and what == "command_execution":
        return [LogItem(LogItemKind.TOOL_CALL, f"shell {task.get('command', '')}")]
    if kind != "item.completed":
        return []
    if what == "agent_message":
        return [LogItem(LogItemKind.MESSAGE, "assistant", _text(task.get("text")))]
    if what == "reasoning":
        return [LogItem(LogItemKind.THINKING, "reasoning", _text(task.get("text")))]
    if what == "command_execution":
        code = task.get("exit_code")
        return [LogItem(LogItemKind.TOOL_RESULT, f"shell exited {code}: {task.get('command', '')}",
                        _text(task.get("aggregated_output")), code not in (0, None))]
    if what == "file_change":
        changes = _list(task.get("changes"))
        paths = ", ".join(f"{c.get('kind', '?')} {c.get('path', '?')}" for c in changes if isinstance(c, dict))
        return [LogItem(LogItemKind.TOOL_CALL, f"file change: {paths}")]
    return [LogItem(LogItemKind.TOOL_CALL, str(what), json.dumps(task, ensure_ascii=False))]


def _event(item: Mapping[str, Any]) -> list[LogItem] | None:
    """The items of one JSON line, or None when it is no event of a known agent."""
    kind = item.get("type")
    if kind in ("system", "assistant", "user", "result"):
        return _claude(item)
    if isinstance(kind, str) and kind.split(".")[0] in ("thread", "turn", "item", "error"):
        return [] if kind in ("thread.started", "turn.started") else _codex(item)
    return None


def read_log(lines: Iterable[str]) -> list[LogItem]:
    """Every line of a log, as the agent events they are; other lines as text, runs of them together."""
    items: list[LogItem] = []
    plain: list[str] = []

    def flush() -> None:
        if plain:
            items.append(LogItem(LogItemKind.OUTPUT, "output", "\n".join(plain).strip("\n")))
            plain.clear()

    for line in lines:
        stripped = line.strip()
        found = None
        if stripped.startswith("{"):
            try:
                value = json.loads(stripped)
            except ValueError:
                value = None
            found = _event(value) if isinstance(value, dict) else None
        if found is None:
            plain.append(line.rstrip("\n"))
            continue
        flush()
        items.extend(found)
    flush()
    return [i for i in items if i.kind != LogItemKind.OUTPUT or i.body.strip()]


def _body(text: str) -> str:
    if len(text) <= BODY_LIMIT:
        return escape(text)
    return escape(text[:BODY_LIMIT]) + f"\n<span class=muted>… {count(len(text) - BODY_LIMIT)} more characters</span>"


def log_html(items: Iterable[LogItem]) -> str:
    """The items as a conversation: messages open, tool calls and results folded under their one-line title."""
    out = []
    for item in items:
        css = f"log-item {item.kind}{' error' if item.error else ''}"
        title = escape(item.title)
        if item.kind in (LogItemKind.MESSAGE, LogItemKind.RESULT) or not item.body:
            body = f"<pre>{_body(item.body)}</pre>" if item.body else ""
            out.append(f"<div class='{css}'><b>{title}</b>{body}</div>")
        else:
            out.append(f"<details class='{css}'><summary>{title}</summary><pre>{_body(item.body)}</pre></details>")
    return "<div class=agent-log>" + "".join(out) + "</div>" if out else "<p class=muted>the log is empty</p>"
