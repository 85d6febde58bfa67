"""A hypothesis: what one experiment tries, and the files it may touch.

The fields follow the seed's research loop: an id and title, metric, current
value, suspected cause, change to try, predicted effect (relative: -0.3 is
30% lower), and the ranking inputs (impact, confidence, effort). `scope` lists the files a worker may change: exact
paths, directories (a trailing `/` or any prefix that is a directory), or
shell-style patterns where `*` also crosses `/`. An empty scope allows any
file but tests; tests are in scope only when an entry names them (`in_scope`).
`patch` names a ready patch file for the `patch` launcher;
`bench_patch` one the patch worker applies to its bench clone (only ever to
show that the lab catches a tampered harness). `launcher` names one of
orchard.toml's `[launchers.NAME]` tables (empty: the lab's default). The TOML format is in
docs/hypotheses.md.
"""

from __future__ import annotations

import fnmatch
import math
import re
import reprlib
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from orchard.errors import UsageError


class Lane(StrEnum):
    """Exploit lanes take the best-ranked hypotheses, explore lanes the speculative ones."""

    EXPLOIT = "exploit"
    EXPLORE = "explore"


class HypothesisStatus(StrEnum):
    """Where a hypothesis stands in the backlog."""

    OPEN = "open"
    RUNNING = "running"  # an experiment is trying it
    LANDED = "landed"
    KILLED = "killed"
    ITERATED = "iterated"  # a sharpened child replaced it

_TEXT_FIELDS = ("id", "title", "metric", "suspected_cause", "change")
_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,47}$")
# The documented ranges (docs/hypotheses.md): every number must be finite and inside its range.
# Confidence is above 0 (a hypothesis nobody believes in is not worth a worker).
RANGES = {"impact": (1.0, 5.0), "confidence": (0.0, 1.0), "effort": (1.0, 5.0)}
MIN_CONFIDENCE = 0.0001  # what learning from kills lowers a confidence to, at the least
# Text a hypothesis carries into lab.db, prompts and the notebook (a planner agent writes it): at most
# this many characters per field; `notes` grows with each ITERATE and keeps its newest part.
TEXT_LIMITS = {"title": 200, "metric": 200, "current_value": 200, "launcher": 64, "suspected_cause": 4000,
               "change": 4000, "notes": 8000, "patch": 4096, "bench_patch": 4096}
MAX_SCOPE_ENTRIES = 200
MAX_SCOPE_ENTRY = 1000


def slug(text: str) -> str:
    """An id made from free text: lower-case words joined by '-'."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return "-".join(words)[:48].strip("-") or "hypothesis"


@dataclass(frozen=True)
class Hypothesis:
    metric: str
    change: str
    id: str = ""
    title: str = ""
    current_value: str = ""
    suspected_cause: str = ""
    predicted_effect: float | None = None
    scope: tuple[str, ...] = ()
    impact: float = 1.0
    confidence: float = 0.5
    effort: float = 1.0
    lane: Lane = Lane.EXPLOIT
    patch: str | None = None
    bench_patch: str | None = None
    launcher: str = ""  # a [launchers.NAME] of orchard.toml; empty: the lab's default launcher
    notes: str = field(default="")

    def __post_init__(self) -> None:
        if not self.id:
            object.__setattr__(self, "id", slug(self.title or self.change))
        if not self.title:
            object.__setattr__(self, "title", self.change)

    def with_paths_relative_to(self, base: Path) -> Hypothesis:
        """Patch paths made absolute against the directory of the file that named them."""
        def absolute(path: str | None) -> str | None:
            return None if path is None else str((Path(base) / path).resolve())
        return replace(self, patch=absolute(self.patch), bench_patch=absolute(self.bench_patch))

    @property
    def predicted_text(self) -> str:
        """The predicted effect as every record shows it."""
        return predicted_text(self.predicted_effect)

    @property
    def score(self) -> float:
        """Rank: impact x confidence / effort."""
        return self.impact * self.confidence / self.effort

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["scope"] = list(self.scope)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "hypothesis", stored: bool = False) -> Hypothesis:
        """Build from parsed TOML/JSON; UsageError naming every bad field.

        `stored`: a record lab.db already holds. Its types are checked, the bounds on new input are not,
        so a lab made before a bound existed still opens.
        """
        problems: list[str] = []
        known = set(cls.__dataclass_fields__)
        problems += [f"{source}.{key}: unknown field" for key in data if key not in known]
        for key in ("metric", "change"):
            if not isinstance(data.get(key), str) or not data.get(key):
                problems.append(f"{source}.{key}: missing (a non-empty string)")
        for key in (*_TEXT_FIELDS, "current_value", "notes", "launcher"):
            value = data.get(key, "")
            if key == "current_value" and finite_number(value):
                continue
            if not isinstance(value, str):
                problems.append(f"{source}.{key}: expected a string, got {reprlib.repr(value)}")
        if data.get("id") and isinstance(data["id"], str) and not _ID.match(data["id"]):
            problems.append(f"{source}.id: {reprlib.repr(data['id'])} must be lower-case letters, digits and '-' "
                            "(at most 48)")
        for key, limit in {} if stored else TEXT_LIMITS.items():
            value = data.get(key)
            if isinstance(value, str) and len(value) > limit:
                problems.append(f"{source}.{key}: {len(value)} characters, at most {limit} allowed")
        predicted = data.get("predicted_effect")
        number = isinstance(predicted, (int, float)) and not isinstance(predicted, bool)
        if predicted is not None and (not number or not stored and (not finite_number(predicted) or predicted < -1)):
            problems.append(f"{source}.predicted_effect: expected a finite relative number of at least -1 "
                            f"(-0.3 = 30% lower), got {reprlib.repr(predicted)}")
        scope = data.get("scope", [])
        if not isinstance(scope, list) or not all(isinstance(item, str) and item for item in scope):
            problems.append(f"{source}.scope: expected a list of paths, got {reprlib.repr(scope)}")
        elif not stored and (len(scope) > MAX_SCOPE_ENTRIES or any(len(item) > MAX_SCOPE_ENTRY for item in scope)):
            problems.append(f"{source}.scope: at most {MAX_SCOPE_ENTRIES} entries of at most {MAX_SCOPE_ENTRY} "
                            "characters allowed")
        for key, (low, high) in RANGES.items():
            value = data.get(key, cls.__dataclass_fields__[key].default)
            exclusive = key == "confidence"
            if stored and isinstance(value, (int, float)) and not isinstance(value, bool):
                continue
            if not finite_number(value) or not (low < value if exclusive else low <= value) or value > high:
                allowed = f"above {low:g} and at most {high:g}" if exclusive else f"from {low:g} to {high:g}"
                problems.append(f"{source}.{key}: expected a number {allowed}, got {reprlib.repr(value)}")
        if data.get("lane", Lane.EXPLOIT) not in tuple(Lane):
            problems.append(f"{source}.lane: {reprlib.repr(data.get('lane'))} is not one of {', '.join(Lane)}")
        for key in ("patch", "bench_patch"):
            if data.get(key) is not None and not isinstance(data[key], str):
                problems.append(f"{source}.{key}: expected a file path, got {reprlib.repr(data[key])}")
        if problems:
            raise UsageError("; ".join(problems))  # each problem already names `source`
        values = {key: value for key, value in data.items() if key in known}
        values["scope"] = tuple(scope)
        values["lane"] = Lane(data.get("lane", Lane.EXPLOIT))
        if "current_value" in values:
            values["current_value"] = str(values["current_value"])
        if values.get("predicted_effect") is not None:
            values["predicted_effect"] = float(values["predicted_effect"])
        return cls(**values)


def finite_number(value: Any) -> bool:
    """A finite int or float (never a bool, nan, inf or an integer beyond 64 bits)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return -(2**63) <= value < 2**63
    return isinstance(value, float) and math.isfinite(value)


def predicted_text(effect: float | None) -> str:
    """A predicted relative effect as people read it: -0.005 is -0.5%, never "-0%"."""
    if effect is None:
        return "(not given)"
    return f"{effect:+.0%}" if abs(effect) >= 0.1 or effect == 0 else f"{effect:+.1%}"


# What a test is, by its path: a file in a tests directory, or named like a test in the common conventions.
TEST_DIRS = frozenset({"tests", "test", "__tests__", "spec"})
TEST_NAMES = ("test_*", "*_test.*", "*_tests.*", "*.test.*", "*.spec.*", "conftest.py", "*Test.java", "*Tests.java")


def is_test_file(path: str) -> bool:
    """Whether `path` (or a scope entry's text) is a test by the conventions above."""
    parts = path.strip("/").split("/")
    return any(part in TEST_DIRS for part in parts[:-1]) or any(
        fnmatch.fnmatchcase(parts[-1], name) for name in TEST_NAMES) or parts[-1] in TEST_DIRS


def in_scope(path: str, scope: Iterable[str]) -> bool:
    """Whether `path` (relative, with `/`) is inside the scope.

    An empty scope allows every file but tests. A test file is in scope only
    when an entry names tests itself (`tests/`, `tests/test_x.py`,
    `**/test_*.py`): a broad `*` or `src/**` never lets a worker edit the
    tests that judge it.
    """
    entries = list(scope)
    test = is_test_file(path)
    if not entries:
        return not test
    for entry in entries:
        if test and not is_test_file(entry):
            continue
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
