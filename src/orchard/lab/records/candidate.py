"""A candidate: what a worker's checkout held beyond its base when it ended, and what collection noticed.

`judge/candidate.py` collects it (the module's docstring there says what
each flag means); lab.db stores it with the experiment; the judge's ladder
reads its flags first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from orchard.lab.records.agent_errors import AgentErrorKind
from orchard.lab.records.agent_usage import AgentUsage
from orchard.lab.records.report_reading import ReportReading, ReportState


class Flag(StrEnum):
    """What collection noticed about a candidate (see the module's docstring)."""

    HARNESS_TAMPERED = "harness-tampered"
    SCOPE_VIOLATION = "scope-violation"
    WORKER_COMMITTED = "worker-committed"
    NO_CHANGES = "no-changes"
    BINARY_FILES = "binary-files"
    PATCH_TOO_LARGE = "patch-too-large"
    TOO_MANY_FILES = "too-many-files"
    REPORT_MISSING = "report-missing"
    REPORT_MALFORMED = "report-malformed"
    REPORT_INVALID = "report-invalid"
    REPORT_UNREADABLE = "report-unreadable"
    SPECIAL_FILES = "special-files"
    TIMED_OUT = "timed-out"
    CANCELLED = "cancelled"
    EXIT_NONZERO = "exit-nonzero"


# A report that is not OK, as collection flags it.
REPORT_FLAGS = {ReportState.MISSING: Flag.REPORT_MISSING, ReportState.MALFORMED: Flag.REPORT_MALFORMED,
                ReportState.INVALID: Flag.REPORT_INVALID, ReportState.UNREADABLE: Flag.REPORT_UNREADABLE}


@dataclass(frozen=True)
class Candidate:
    experiment: str
    worker: str
    target_base: str
    bench_base: str
    target_head: str
    patch: str  # empty when refused (binary blobs, oversize, too many files)
    changed_files: list[str]
    scope: list[str]
    scope_violations: list[str]
    bench_changes: list[str]
    bench_head: str
    report: ReportReading
    log_path: str
    exit_code: int | None
    signal: int | None
    duration_s: float
    started_at: str
    usage: AgentUsage
    flags: list[Flag] = field(default_factory=list)
    host: str | None = None  # the dask worker's host and address; None: this machine
    patch_bytes: int = 0
    binary_files: list[str] = field(default_factory=list)
    launcher: str = ""  # the launcher that ran, as orchard.toml names it
    launcher_failure: str | None = None  # the agent's own account of why it could not work at all
    agent_error: AgentErrorKind | None = None  # what kind of error that was (records/agent_errors.py)
    model_answered: bool | None = None  # whether its model answered at all (None: its CLI cannot tell)
    special_files: list[str] = field(default_factory=list)  # each with what it is

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record for the lab's state."""
        data = asdict(self)
        data["report"] = self.report.to_dict()
        data["usage"] = self.usage.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Candidate:
        values = {key: data[key] for key in cls.__dataclass_fields__ if key in data}
        values["report"] = ReportReading.from_dict(data["report"])
        values["usage"] = AgentUsage.from_dict(data.get("usage") or {})
        values["flags"] = [Flag(flag) for flag in data.get("flags", [])]
        values["agent_error"] = AgentErrorKind(data["agent_error"]) if data.get("agent_error") else None
        return cls(**values)
