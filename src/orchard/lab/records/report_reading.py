"""What was found where a worker's report should be: the report, or why there is none.

`workers/workspace/report.py` reads the file (and says what the report's schema is);
a candidate holds the reading as found, never filled in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class ReportState(StrEnum):
    """What was found where the report should be."""

    OK = "ok"
    MISSING = "missing"
    MALFORMED = "malformed"  # not JSON
    INVALID = "invalid"  # JSON that breaks the schema
    UNREADABLE = "unreadable"  # not a regular file, over the cap, not UTF-8, nested too deep


@dataclass(frozen=True)
class ReportReading:
    """What was found where the report should be. `report` is set only when `state` is OK."""

    state: ReportState
    path: str
    report: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)
    raw: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReportReading:
        return cls(
            ReportState(data["state"]), str(data["path"]), data.get("report"), list(data.get("problems", [])),
            data.get("raw"),
        )
