"""A script: the steps a scripted model endpoint plays, read from a TOML file a reviewer can follow.

```toml
include = ["orchard-worker.toml"]  # its captures, and its steps after these (paths relative to this file)

[capture]                       # name = regex on every request's first user message (its group 1)
report = 'write .*? to `([^`]+)`'

[[step]]
name = "edit"                   # shown in the request log
match = { prompt = "count-with-dict", turn = 1 }   # every key given must hold (regexes, searched)
tool = [{ name = "Edit", input = { file_path = "${target_dir}/wc.py", old_string = "a", new_string = "b" } }]

[[step]]
match = { tool_result = "exit code 0" }
text = "Done."
usage = { input_tokens = 900, output_tokens = 40 }
times = 0                       # answers any number of requests (default 1)

[[step]]
error = { status = 429, type = "rate_limit_error", message = "slow down" }

[[step]]
text = "never finished"
stall_after = 1                 # send one stream event, then nothing more
```

Steps are tried in order; the first one with answers left whose `match`
holds answers. `${name}` in any reply string is a capture of this request
(from `[capture]` or a `match` regex's named group) or a value the test
gave the endpoint's process (`ENDPOINT_VALUE_name` in its environment: a
path known only when the test runs); a name not captured is
a script error the endpoint answers with HTTP 500, so a test sees it. A
request no step matches gets a short text reply and is logged with no step.
"""

from __future__ import annotations

import os
import re
import threading
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.agents.endpoint.exchange import Asked, Reply, ToolCall, Usage

MATCH_KEYS = ("prompt", "system", "tool_result", "model", "tool_offered", "wire")
STEP_KEYS = ("name", "match", "times", "text", "tool", "stop_reason", "usage", "error", "stall_after")
UNMATCHED = Reply(text="(no scripted step matched this request)")
VALUE_PREFIX = "ENDPOINT_VALUE_"  # the test's own values, by environment variable
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ScriptError(ValueError):
    """The script file is wrong, or a reply names a value nothing captured."""


@dataclass(frozen=True)
class Step:
    """One scripted answer and the requests it answers."""

    name: str
    patterns: dict[str, re.Pattern[str]]
    turn: int | None
    times: int  # 0: any number
    reply: dict[str, Any]  # the step's reply keys, `${name}` still in them

    def captures(self, asked: Asked) -> dict[str, str] | None:
        """The named groups of its patterns when every condition holds, else None."""
        if self.turn is not None and asked.turn != self.turn:
            return None
        found: dict[str, str] = {}
        for key, pattern in self.patterns.items():
            if key == "tool_offered":
                if not any(pattern.fullmatch(name) for name in asked.tools):
                    return None
                continue
            value = getattr(asked, key)
            match = pattern.search(value) if isinstance(value, str) else None
            if match is None:
                return None
            found.update({k: v for k, v in match.groupdict().items() if v is not None})
        return found


def _fill(value: Any, values: dict[str, str]) -> Any:
    if isinstance(value, str):
        def one(match: re.Match[str]) -> str:
            if match.group(1) not in values:
                raise ScriptError(f"${{{match.group(1)}}} was not captured from this request")
            return values[match.group(1)]
        return _VARIABLE.sub(one, value)
    if isinstance(value, list):
        return [_fill(item, values) for item in value]
    if isinstance(value, dict):
        return {key: _fill(item, values) for key, item in value.items()}
    return value


def reply_of(keys: dict[str, Any], values: dict[str, str]) -> Reply:
    """The step's reply with `values` filled in."""
    filled = _fill(keys, values)
    error = filled.get("error") or {}
    return Reply(
        text=filled.get("text", ""),
        tools=tuple(ToolCall(t["name"], dict(t.get("input", {}))) for t in filled.get("tool", [])),
        stop_reason=filled.get("stop_reason", ""),
        usage=Usage(**filled.get("usage", {})),
        status=int(error.get("status", 200)),
        error_type=error.get("type", ""),
        message=error.get("message", ""),
        stall_after=filled.get("stall_after"),
    )


@dataclass
class Script:
    """The steps of one script file and how many answers each has given."""

    path: Path
    capture: dict[str, re.Pattern[str]]
    steps: list[Step]
    used: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def load(cls, path: Path) -> Script:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        unknown = set(data) - {"include", "capture", "step"}
        if unknown:
            raise ScriptError(f"{path}: unknown top-level keys {sorted(unknown)}")
        steps = [_step(path, index, table) for index, table in enumerate(data.get("step", []), 1)]
        capture: dict[str, re.Pattern[str]] = {}
        for included in data.get("include", []):
            other = cls.load(path.parent / included)
            capture.update(other.capture)
            steps += other.steps
        capture.update({name: re.compile(text, re.MULTILINE) for name, text in data.get("capture", {}).items()})
        return cls(path, capture, steps, [0] * len(steps))

    def answer(self, asked: Asked) -> tuple[str | None, dict[str, str], Reply]:
        """The step that answers (its name, or None), what this request captured, and the reply."""
        values = {name.removeprefix(VALUE_PREFIX): value for name, value in os.environ.items()
                  if name.startswith(VALUE_PREFIX)}
        for name, pattern in self.capture.items():
            if (match := pattern.search(asked.prompt)) is not None:
                values[name] = match.group(1) if match.groups() else match.group(0)
        with self.lock:
            for index, step in enumerate(self.steps):
                if step.times and self.used[index] >= step.times:
                    continue
                found = step.captures(asked)
                if found is None:
                    continue
                self.used[index] += 1
                values.update(found)
                try:
                    return step.name, values, reply_of(step.reply, values)
                except ScriptError as error:
                    return step.name, values, Reply(status=500, error_type="script_error", message=str(error))
        return None, values, UNMATCHED


def _step(path: Path, index: int, table: dict[str, Any]) -> Step:
    where = f"{path}: step {index}"
    unknown = set(table) - set(STEP_KEYS)
    if unknown:
        raise ScriptError(f"{where}: unknown keys {sorted(unknown)}")
    match = dict(table.get("match", {}))
    turn = match.pop("turn", None)
    if set(match) - set(MATCH_KEYS):
        raise ScriptError(f"{where}: unknown match keys {sorted(set(match) - set(MATCH_KEYS))}")
    patterns = {key: re.compile(str(text), re.DOTALL) for key, text in match.items()}
    reply = {key: value for key, value in table.items() if key not in ("name", "match", "times")}
    return Step(str(table.get("name", f"step {index}")), patterns, turn, int(table.get("times", 1)), reply)
