"""A lab's stop limits changed in its orchard.toml, in place: `orchard resume LAB --max-cost-usd N`.

The file is the user's: only the lines of the keys asked for change (or are added under `[stop]`), every
comment and other line stays. It is loaded whole again afterwards, as every run loads it, and put back as it
was when it no longer loads: a bad value is refused with the loader's own message, and nothing is changed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

import tomli_w

from orchard.errors import UsageError
from orchard.lab.config.orchard_toml import load
from orchard.lab.config.sections import StopConfig
from orchard.lab.records.steering_events import LimitChanged

STOP = "stop"
_TABLE = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def _table(line: str) -> str | None:
    found = _TABLE.match(line)
    return None if found is None else found.group(1)


def _with_key(text: str, line: str) -> str:
    """`text` with `line` (`key = value`) in its `[stop]` table: replacing the key's line, or added there."""
    key = line.split("=", 1)[0].strip()
    lines = text.splitlines()
    start = next((i for i, each in enumerate(lines) if _table(each) == STOP), None)
    if start is None:
        return text.rstrip("\n") + f"\n\n[{STOP}]\n{line}\n"
    end = next((i for i in range(start + 1, len(lines)) if _table(lines[i]) is not None), len(lines))
    at = next((i for i in range(start + 1, end) if re.match(rf"\s*{re.escape(key)}\s*=", lines[i])), None)
    if at is None:
        lines.insert(start + 1, line)
    else:
        lines[at] = line
    return "\n".join(lines) + "\n"


def set_limits(path: Path, values: Mapping[str, float]) -> tuple[LimitChanged, ...]:
    """Write these `[stop]` keys into orchard.toml; the limits that changed (UsageError, file untouched, if the
    result does not load)."""
    before = load(path).stop
    original = path.read_text(encoding="utf-8")
    text = original
    for key, value in values.items():
        kind = type(getattr(StopConfig(), key))
        text = _with_key(text, tomli_w.dumps({key: kind(value) if kind(value) == value else value}).strip())
    _write(path, text)
    try:
        after = load(path).stop
    except UsageError as error:
        _write(path, original)
        raise UsageError(f"{error} (orchard.toml was left as it was)") from None
    return tuple(LimitChanged(key, float(getattr(before, key)), float(getattr(after, key))) for key in values
                 if getattr(before, key) != getattr(after, key))


def _write(path: Path, text: str) -> None:
    """Replace the file whole (a lab reading it never sees half of it)."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
