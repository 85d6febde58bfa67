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
- `special-files`: a symlink out of the checkout, a FIFO, socket, device or
  nested repository (`special_files`): refused, each file named.
- `report-missing` / `report-malformed` / `report-invalid` /
  `report-unreadable`: the report is recorded as found, never filled in.
- `timed-out` / `cancelled` / `exit-nonzero`: how the process ended.

Together with the report, the log path, exit code, duration and the agent's
own cost and token figures, this is what the lab stores for the experiment.

There is one collector for every executor. A local worker's checkouts are
read on the lab's host (`checkout_reader`); a dask worker's are read by the
same reader on its host, and its task sends the reading back with the
report's text and the log's tail (`worker_output.RemoteRun`), which are
copied into the workspace here. Both become one `WorkerOutput`, and
`candidate_from` alone works out the rest: the build outputs and scratch
files left out of the patch, the changed files as git reads the patch, the
scope, special files, report, usage and every flag. The lab trusts none of
a remote worker's conclusions: it sends facts, and this decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from orchard.lab import report as report_module
from orchard.lab import special_files
from orchard.lab.agent_usage import AgentUsage
from orchard.lab.checkout_reader import read_checkout
from orchard.lab.executors import JobResult
from orchard.lab.executors.process import log_tail
from orchard.lab.experiment import Experiment
from orchard.lab.hypothesis import outside_scope
from orchard.lab.launcher import Launcher
from orchard.lab.patches import binary_files, patch_files, without
from orchard.lab.report import ReportReading
from orchard.lab.worker_output import RemoteRun, WorkerOutput
from orchard.lab.workspace import BASELINE_COPY, REPORT_NAME, Workspace


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
    REPORT_UNREADABLE = "report-unreadable"
    SPECIAL_FILES = "special-files"
    TIMED_OUT = "timed-out"
    CANCELLED = "cancelled"
    EXIT_NONZERO = "exit-nonzero"


SHOWN_NAMES = 3


def a_few(names: list[str] | tuple[str, ...], shown: int = SHOWN_NAMES) -> str:
    """Some names and how many more: a reason stays one line however many files there are."""
    listed = ", ".join(names[:shown])
    more = len(names) - shown
    return f"{listed} and {more} more" if more > 0 else listed


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
    host: str | None = None  # the dask worker's host and address; None: this machine
    patch_bytes: int = 0
    binary_files: list[str] = field(default_factory=list)
    launcher: str = ""  # the launcher that ran, as orchard.toml names it
    launcher_failure: str | None = None  # the agent's own account of why it could not work at all
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
        return cls(**values)


def _flags(*, tampered: bool, violations: list[str], committed: bool, unchanged: bool, binary: bool,
           too_large: bool, report: str, timed_out: bool, cancelled: bool, exit_code: int | None,
           special: bool = False) -> list[Flag]:
    flags: list[Flag] = []
    if tampered:
        flags.append(Flag.HARNESS_TAMPERED)
    if violations:
        flags.append(Flag.SCOPE_VIOLATION)
    if committed:
        flags.append(Flag.WORKER_COMMITTED)
    if unchanged:
        flags.append(Flag.NO_CHANGES)
    if binary:
        flags.append(Flag.BINARY_FILES)
    if too_large:
        flags.append(Flag.PATCH_TOO_LARGE)
    if special:
        flags.append(Flag.SPECIAL_FILES)
    if report != "ok":
        flags.append(Flag(f"report-{report}"))
    if timed_out:
        flags.append(Flag.TIMED_OUT)
    elif cancelled:
        flags.append(Flag.CANCELLED)
    elif exit_code != 0:
        flags.append(Flag.EXIT_NONZERO)
    return flags


def never_the_change(workspace: Workspace, launcher: Launcher) -> list[str]:
    """What a checkout holds that is never the change: the report, the baseline copy, `[target] ignore` (build
    outputs), the agent CLI's scratch files. Gitignore-style globs."""
    return [f"/{REPORT_NAME}", f"/{BASELINE_COPY}/", *workspace.config.target.ignore, *launcher.scratch]


def collect_candidate(
    workspace: Workspace, experiment: Experiment, result: JobResult, launcher: Launcher
) -> Candidate:
    """Read what the worker left, here or on the dask worker it ran on, and judge it as a candidate."""
    if result.remote is None:
        worker = experiment.checkout.worker
        output = WorkerOutput(read_checkout(workspace, experiment, never_the_change(workspace, launcher)),
                              report_module.read_report(worker.report_path, experiment.name), result.log_path)
    else:
        output = received(workspace, experiment.name, result.remote, result.reason)
    return candidate_from(workspace, experiment, result, output, launcher)


def received(workspace: Workspace, name: str, run: RemoteRun, error: str | None) -> WorkerOutput:
    """A remote run's log, prompt and report copied into the workspace, beside its reading."""
    log = workspace.log_path(name)
    log.parent.mkdir(parents=True, exist_ok=True)
    fetched = f", checkouts fetched from {run.fetched_from}" if run.fetched_from else ""
    timings = run.timings
    log.write_text(f"[orchard] ran on dask worker {run.where}{fetched}; timings setup {timings.setup_s:g} s, "
                   f"run {timings.run_s:g} s, collect {timings.collect_s:g} s\n"
                   + (f"[orchard] {error}\n" if error else "") + run.log_tail, encoding="utf-8")
    if run.prompt:
        workspace.prompt_path(name).write_text(run.prompt, encoding="utf-8")
    report_copy = workspace.logs_dir / f"{name}.report.json"
    report_copy.unlink(missing_ok=True)
    if run.report_text is not None:
        report_copy.write_text(run.report_text, encoding="utf-8")
    report = (report_module.read_report(report_copy, name) if run.report_unreadable is None else
              ReportReading("unreadable", str(report_copy), problems=[run.report_unreadable]))
    return WorkerOutput(run.reading, report, log, host=run.where)


def candidate_from(workspace: Workspace, experiment: Experiment, result: JobResult, output: WorkerOutput,
                   launcher: Launcher) -> Candidate:
    """The one place a candidate is worked out, whichever executor ran its worker."""
    checkout = experiment.checkout
    reading = output.reading
    patch = without(reading.patch, never_the_change(workspace, launcher))
    changed = patch_files(patch)
    scope = list(experiment.hypothesis.scope)
    violations = outside_scope(changed, scope)
    special = [*reading.special_files, *special_files.in_patch(patch)]
    report = output.report
    log_text = log_tail(output.log_path)
    binaries = binary_files(patch)
    patch_bytes = len(patch.encode("utf-8", errors="surrogateescape"))
    committed = reading.target_head not in ("", checkout.target_base)
    flags = _flags(tampered=reading.bench_tampered, violations=violations, committed=committed,
                   unchanged=not changed and not committed, binary=bool(binaries),
                   too_large=patch_bytes > workspace.config.target.max_patch_kb * 1024, report=report.state,
                   timed_out=result.timed_out, cancelled=result.cancelled, exit_code=result.exit_code,
                   special=bool(special))
    refused = binaries or special or Flag.PATCH_TOO_LARGE in flags
    return Candidate(
        experiment=experiment.name, worker=checkout.worker.name, target_base=checkout.target_base,
        bench_base=checkout.bench_base, target_head=reading.target_head, patch="" if refused else patch,
        patch_bytes=patch_bytes, binary_files=binaries, special_files=special, changed_files=changed, scope=scope,
        scope_violations=violations, bench_changes=list(reading.bench_files), bench_head=reading.bench_head,
        report=report, log_path=str(output.log_path), exit_code=result.exit_code, signal=result.signal,
        duration_s=result.duration_s, started_at=result.started_at, usage=launcher.usage(log_text),
        launcher=launcher.label, launcher_failure=launcher.failure(log_text, result.exit_code), flags=flags,
        host=output.host,
    )
