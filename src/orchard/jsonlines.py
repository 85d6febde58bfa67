"""One scanner for JSON-lines text: orchard's own row files, other tools' output, agent logs.

Row files orchard writes are read strictly (a line that is not a JSON object
is a broken file, named with its line number); text that mixes JSON objects
with other output (a harness's stdout, an agent's log) is read leniently,
keeping only the lines that are JSON objects.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def json_objects(
    lines: str | Iterable[str], *, strict: bool = False, source: str = "text"
) -> list[dict[str, Any]]:
    """The JSON objects of `lines` (a text or its lines), one per non-blank line, in order.

    Lenient (the default) skips every line that is not a JSON object; strict
    raises ValueError naming `source` and the line instead.
    """
    found: list[dict[str, Any]] = []
    for number, line in enumerate(lines.splitlines() if isinstance(lines, str) else lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            value = json.loads(line) if strict or line.startswith("{") else None
        except ValueError as error:
            if strict:
                raise ValueError(f"{source} line {number} is not JSON: {error}") from None
            continue
        if isinstance(value, dict):
            found.append(value)
        elif strict:
            raise ValueError(f"{source} line {number} is not a JSON object")
    return found


def last_json_object(lines: str | Iterable[str], *, key: str | None = None) -> dict[str, Any] | None:
    """The last JSON object of mixed output (read leniently) that has `key` when one is named, or None.

    A tool's result is the last object it printed: whatever it logged before is not the answer.
    """
    found = [value for value in json_objects(lines) if key is None or key in value]
    return found[-1] if found else None


def read_jsonl(path: Path | str) -> list[dict[str, Any]]:
    """Every row of a JSON-lines file orchard wrote (strict: a broken line is an error naming it)."""
    with open(path, encoding="utf-8") as handle:
        return json_objects(handle, strict=True, source=str(path))
