"""A hypothesis: what one experiment tries, and the files it may touch.

The fields follow the seed's research loop: metric, current value, suspected
cause, change to try, predicted effect, and the ranking inputs (impact,
confidence, effort). `scope` lists the files a worker may change: exact
paths, directories (a trailing `/` or any prefix that is a directory), or
shell-style patterns where `*` also crosses `/`. An empty scope allows any
file. `patch` names a ready patch file for the `patch` launcher.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from orchard.errors import UsageError

LANES = ("exploit", "explore")
_TEXT_FIELDS = ("metric", "suspected_cause", "change", "predicted_effect")


@dataclass(frozen=True)
class Hypothesis:
    metric: str
    change: str
    current_value: str = ""
    suspected_cause: str = ""
    predicted_effect: str = ""
    scope: tuple[str, ...] = ()
    impact: float = 1.0
    confidence: float = 0.5
    effort: float = 1.0
    lane: str = "exploit"
    patch: str | None = None
    notes: str = field(default="")

    @property
    def score(self) -> float:
        """Rank: impact x confidence / effort."""
        return self.impact * self.confidence / self.effort

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["scope"] = list(self.scope)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "hypothesis") -> Hypothesis:
        """Build from parsed TOML/JSON; UsageError naming every bad field."""
        problems: list[str] = []
        known = set(cls.__dataclass_fields__)
        problems += [f"{source}.{key}: unknown field" for key in data if key not in known]
        for key in ("metric", "change"):
            if not isinstance(data.get(key), str) or not data.get(key):
                problems.append(f"{source}.{key}: missing (a non-empty string)")
        for key in (*_TEXT_FIELDS, "current_value", "notes"):
            value = data.get(key, "")
            if key == "current_value" and isinstance(value, (int, float)) and not isinstance(value, bool):
                continue
            if not isinstance(value, str):
                problems.append(f"{source}.{key}: expected a string, got {value!r}")
        scope = data.get("scope", [])
        if not isinstance(scope, list) or not all(isinstance(item, str) and item for item in scope):
            problems.append(f"{source}.scope: expected a list of paths, got {scope!r}")
        for key in ("impact", "confidence", "effort"):
            value = data.get(key, 1.0)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                problems.append(f"{source}.{key}: expected a positive number, got {value!r}")
        if data.get("lane", "exploit") not in LANES:
            problems.append(f"{source}.lane: {data.get('lane')!r} is not one of {', '.join(LANES)}")
        patch = data.get("patch")
        if patch is not None and not isinstance(patch, str):
            problems.append(f"{source}.patch: expected a file path, got {patch!r}")
        if problems:
            raise UsageError(f"{source}: " + "; ".join(problems))
        values = {key: value for key, value in data.items() if key in known}
        values["scope"] = tuple(scope)
        if "current_value" in values:
            values["current_value"] = str(values["current_value"])
        return cls(**values)


def in_scope(path: str, scope: Iterable[str]) -> bool:
    """Whether `path` (relative, with `/`) is inside the scope (an empty scope allows everything)."""
    entries = list(scope)
    if not entries:
        return True
    for entry in entries:
        entry = entry.strip("/") if not any(ch in entry for ch in "*?[") else entry.lstrip("/")
        if any(ch in entry for ch in "*?["):
            if fnmatch.fnmatchcase(path, entry):
                return True
        elif path == entry or path.startswith(entry + "/"):
            return True
    return False


def outside_scope(paths: Iterable[str], scope: Iterable[str]) -> list[str]:
    """The paths a worker was not allowed to touch."""
    entries = list(scope)
    return [path for path in paths if not in_scope(path, entries)]
