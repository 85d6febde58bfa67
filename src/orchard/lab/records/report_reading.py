"""What was found where a worker's report should be: the report, or why there is none.

`workers/report.py` reads the file (and says what the report's schema is);
a candidate holds the reading as found, never filled in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class ReportReading:
    """What was found where the report should be. `report` is set only when `state` is `ok`."""

    state: str  # ok | missing | malformed | invalid | unreadable
    path: str
    report: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)
    raw: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReportReading:
        return cls(
            str(data["state"]), str(data["path"]), data.get("report"), list(data.get("problems", [])), data.get("raw")
        )
