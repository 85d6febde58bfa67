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
- `binary-files` / `patch-too-large` / `too-many-files`: the change holds
  binary blobs, its patch is larger than `[target] max_patch_kb`, or it
  touches more files than `[target] max_patch_files` (build outputs the
  ignore lists missed, as a rule): refused, and the patch is not stored.
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

import dataclasses

from orchard.lab.records.candidate import REPORT_FLAGS, Candidate, Flag
from orchard.lab.records.experiment import Experiment
from orchard.lab.records.hypothesis import outside_scope
from orchard.lab.records.report_reading import ReportReading, ReportState
from orchard.lab.records.worker_output import RemoteRun, WorkerOutput
from orchard.lab.workers.executors.local import log_tail
from orchard.lab.workers.jobs.job import JobResult
from orchard.lab.workers.launchers.launcher_base import Launcher
from orchard.lab.workers.worker_run.checkout_reader import never_the_change, read_checkout
from orchard.lab.workers.workspace import report as report_module
from orchard.lab.workers.workspace import special_files
from orchard.lab.workers.workspace.patches import binary_files, patch_files, without
from orchard.lab.workers.workspace.workspace import Workspace


def _flags(*, tampered: bool, violations: list[str], committed: bool, unchanged: bool, binary: bool,
           too_large: bool, report: ReportState, timed_out: bool, cancelled: bool, exit_code: int | None,
           special: bool = False, too_many: bool = False) -> list[Flag]:
    noticed = ((tampered, Flag.HARNESS_TAMPERED), (bool(violations), Flag.SCOPE_VIOLATION),
               (committed, Flag.WORKER_COMMITTED), (unchanged, Flag.NO_CHANGES), (binary, Flag.BINARY_FILES),
               (too_large, Flag.PATCH_TOO_LARGE), (too_many, Flag.TOO_MANY_FILES), (special, Flag.SPECIAL_FILES))
    flags = [flag for present, flag in noticed if present]
    if report != ReportState.OK:
        flags.append(REPORT_FLAGS[report])
    if timed_out:
        flags.append(Flag.TIMED_OUT)
    elif cancelled:
        flags.append(Flag.CANCELLED)
    elif exit_code != 0:
        flags.append(Flag.EXIT_NONZERO)
    return flags


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
              ReportReading(ReportState.UNREADABLE, str(report_copy), problems=[run.report_unreadable]))
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
    error = launcher.agent_error(log_text, result.exit_code)
    answered = launcher.model_answered(log_text)
    usage = launcher.usage(log_text)
    if answered is False and usage.cost_usd is None:  # nothing reached its model: nothing was spent, "$0"
        usage = dataclasses.replace(usage, cost_usd=0.0)
    usage = launcher.priced(usage, workspace.config.prices)
    binaries = binary_files(patch)
    patch_bytes = len(patch.encode("utf-8", errors="surrogateescape"))
    committed = reading.target_head not in ("", checkout.target_base)
    flags = _flags(tampered=reading.bench_tampered, violations=violations, committed=committed,
                   unchanged=not changed and not committed, binary=bool(binaries),
                   too_large=patch_bytes > workspace.config.target.max_patch_kb * 1024, report=report.state,
                   timed_out=result.timed_out, cancelled=result.cancelled, exit_code=result.exit_code,
                   special=bool(special), too_many=len(changed) > workspace.config.target.max_patch_files)
    refused = binaries or special or {Flag.PATCH_TOO_LARGE, Flag.TOO_MANY_FILES} & set(flags)
    return Candidate(
        experiment=experiment.name, worker=checkout.worker.name, target_base=checkout.target_base,
        bench_base=checkout.bench_base, target_head=reading.target_head, patch="" if refused else patch,
        patch_bytes=patch_bytes, binary_files=binaries, special_files=special, changed_files=changed, scope=scope,
        scope_violations=violations, bench_changes=list(reading.bench_files), bench_head=reading.bench_head,
        report=report, log_path=str(output.log_path), exit_code=result.exit_code, signal=result.signal,
        duration_s=result.duration_s, started_at=result.started_at, usage=usage,
        launcher=launcher.label, launcher_failure=None if error is None else error.message,
        agent_error=None if error is None else error.kind, flags=flags, host=output.host,
        model_answered=answered,
    )
