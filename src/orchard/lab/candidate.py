"""Collecting a candidate when a worker ends.

The candidate is what the worker's target checkout holds beyond the recorded
base (commits, edits and new files, as one patch), judged before anyone
builds it:

- `harness-tampered`: the worker's bench checkout is not exactly at its base
  (a tracked file changed, a file added that the harness does not ignore,
  or a commit made): the experiment is void.
- `scope-violation`: files changed outside the hypothesis's scope, listed.
- `worker-committed`: the target checkout's head moved (workers must not
  commit); the patch still covers everything since the base.
- `no-changes`: the worker changed nothing.
- `binary-files` / `patch-too-large`: the change holds binary blobs, or its
  patch is larger than `[target] max_patch_kb` (build outputs the ignore
  lists missed, as a rule): refused, and the patch is not stored.
- `report-missing` / `report-malformed` / `report-invalid`: the report is
  recorded as found, never filled in.
- `timed-out` / `cancelled` / `exit-nonzero`: how the process ended.

Together with the report, the log path, exit code, duration and the agent's
own cost and token figures, this is what the lab stores for the experiment.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from orchard.lab import report as report_module
from orchard.lab.executors import JobResult
from orchard.lab.experiment import Experiment
from orchard.lab.hypothesis import outside_scope
from orchard.lab.launchers import AgentUsage, Launcher
from orchard.lab.report import ReportReading
from orchard.lab.workspace import REPORT_NAME, Workspace


class Flag(StrEnum):
    """What collection noticed about a candidate (see the module's docstring)."""

    HARNESS_TAMPERED = "harness-tampered"
    SCOPE_VIOLATION = "scope-violation"
    WORKER_COMMITTED = "worker-committed"
    NO_CHANGES = "no-changes"
    BINARY_FILES = "binary-files"
    PATCH_TOO_LARGE = "patch-too-large"
    REPORT_MISSING = "report-missing"
    REPORT_MALFORMED = "report-malformed"
    REPORT_INVALID = "report-invalid"
    TIMED_OUT = "timed-out"
    CANCELLED = "cancelled"
    EXIT_NONZERO = "exit-nonzero"


SHOWN_NAMES = 3


def a_few(names: list[str] | tuple[str, ...], shown: int = SHOWN_NAMES) -> str:
    """Some names and how many more: a reason stays one line however many files there are."""
    listed = ", ".join(names[:shown])
    more = len(names) - shown
    return f"{listed} and {more} more" if more > 0 else listed


def binary_files(patch: str) -> list[str]:
    """Files a git patch adds or changes as binary content (a deleted binary file is fine)."""
    found = []
    for section in patch.split("diff --git ")[1:]:
        header, _, body = section.partition("\n")
        if ("\nGIT binary patch\n" in "\n" + body or "\nBinary files " in "\n" + body) \
                and "\ndeleted file mode" not in "\n" + body:
            found.append(header.split(" b/", 1)[-1])
    return found


@dataclass(frozen=True)
class Candidate:
    experiment: str
    worker: str
    target_base: str
    bench_base: str
    target_head: str
    patch: str  # empty when refused (binary blobs, oversize)
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
    patch_bytes: int = 0
    binary_files: list[str] = field(default_factory=list)
    launcher: str = ""  # the launcher that ran, as orchard.toml names it
    launcher_failure: str | None = None  # the agent's own account of why it could not work at all

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
        return cls(**values)


def _without_scratch(files: tuple[str, ...], scratch: tuple[str, ...]) -> list[str]:
    """Drop the report and the CLI's scratch files (VCSs without local ignores list them)."""
    patterns = (REPORT_NAME, *scratch)
    return [path for path in files
            if not any(fnmatch.fnmatchcase(path, p) or fnmatch.fnmatchcase(path.split("/")[0], p)
                       for p in patterns)]


def collect_candidate(
    workspace: Workspace, experiment: Experiment, result: JobResult, launcher: Launcher
) -> Candidate:
    """Read what the worker left: its patch, its bench's state, its report, its usage."""
    checkout = experiment.checkout
    worker = checkout.worker
    target = workspace.target_vcs.changes(worker.target_dir, checkout.target_base, workspace.config.target.ignore)
    bench = workspace.bench_vcs.changes(worker.bench_dir, checkout.bench_base)
    changed = _without_scratch(target.files, launcher.scratch)
    scope = list(experiment.hypothesis.scope)
    violations = outside_scope(changed, scope)
    reading = report_module.read_report(worker.report_path, experiment.name)
    log = result.log_path
    log_text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""

    flags: list[Flag] = []
    if bench.files or bench.head != checkout.bench_base:
        flags.append(Flag.HARNESS_TAMPERED)
    if violations:
        flags.append(Flag.SCOPE_VIOLATION)
    if target.head != checkout.target_base:
        flags.append(Flag.WORKER_COMMITTED)
    if not changed and target.head == checkout.target_base:
        flags.append(Flag.NO_CHANGES)
    binaries = binary_files(target.patch)
    patch_bytes = len(target.patch.encode("utf-8", errors="surrogateescape"))
    if binaries:
        flags.append(Flag.BINARY_FILES)
    if patch_bytes > workspace.config.target.max_patch_kb * 1024:
        flags.append(Flag.PATCH_TOO_LARGE)
    if reading.state != "ok":
        flags.append(Flag(f"report-{reading.state}"))
    if result.timed_out:
        flags.append(Flag.TIMED_OUT)
    elif result.cancelled:
        flags.append(Flag.CANCELLED)
    elif result.exit_code != 0:
        flags.append(Flag.EXIT_NONZERO)

    return Candidate(
        experiment=experiment.name,
        worker=worker.name,
        target_base=checkout.target_base,
        bench_base=checkout.bench_base,
        target_head=target.head,
        patch="" if binaries or Flag.PATCH_TOO_LARGE in flags else target.patch,
        patch_bytes=patch_bytes,
        binary_files=binaries,
        changed_files=changed,
        scope=scope,
        scope_violations=violations,
        bench_changes=list(bench.files),
        bench_head=bench.head,
        report=reading,
        log_path=str(result.log_path),
        exit_code=result.exit_code,
        signal=result.signal,
        duration_s=result.duration_s,
        started_at=result.started_at,
        usage=launcher.usage(log_text),
        launcher=launcher.label,
        launcher_failure=launcher.failure(log_text, result.exit_code),
        flags=flags,
    )
