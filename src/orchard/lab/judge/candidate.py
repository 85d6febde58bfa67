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

A worker's checkouts are foreign: they are never read with their own VCS
configuration. Each is read through a fresh judge-owned repository holding its base
(`judge/collect-<experiment>/`), whose repository looks at the worker's
files (`Vcs.foreign_changes`); nothing in the worker's `.git` runs or counts.

Together with the report, the log path, exit code, duration and the agent's
own cost and token figures, this is what the lab stores for the experiment.

A worker that ran on a dask worker (`from_remote`) is collected from what
its task sent back; the lab trusts none of its conclusions: the changed
files come from the patch itself (`git apply --numstat`), and the scope
and every flag are worked out here as for a local worker.
"""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from orchard.lab.judge import special_files
from orchard.lab.records.candidate import Candidate, Flag
from orchard.lab.records.experiment import Experiment
from orchard.lab.records.hypothesis import outside_scope
from orchard.lab.records.worker import BASELINE_COPY, REPORT_NAME
from orchard.lab.workers import report as report_module
from orchard.lab.workers.bench_view import worker_bench_source
from orchard.lab.workers.executors import JobResult
from orchard.lab.workers.executors.base import log_tail
from orchard.lab.workers.launcher_base import Launcher
from orchard.lab.workers.remote import RemoteOutcome
from orchard.lab.workers.vcs import Changes, Vcs
from orchard.lab.workers.workspace import Workspace


def binary_files(patch: str) -> list[str]:
    """Files a git patch adds or changes as binary content (a deleted binary file is fine)."""
    found = []
    for section in patch.split("diff --git ")[1:]:
        header, _, body = section.partition("\n")
        if ("\nGIT binary patch\n" in "\n" + body or "\nBinary files " in "\n" + body) \
                and "\ndeleted file mode" not in "\n" + body:
            found.append(header.split(" b/", 1)[-1])
    return found


def _without_scratch(files: tuple[str, ...], scratch: tuple[str, ...]) -> list[str]:
    """Drop the report and the CLI's scratch files (VCSs without local ignores list them)."""
    patterns = (REPORT_NAME, *scratch)
    return [path for path in files
            if not any(fnmatch.fnmatchcase(path, p) or fnmatch.fnmatchcase(path.split("/")[0], p)
                       for p in patterns)]


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


def _foreign(vcs: Vcs, source: Path, work_tree: Path, base: str, clean: Path, ignore: Sequence[str], *,
             patch: bool = True) -> Changes:
    """A worker's checkout read through a fresh repository of ours holding `base` (`patch=False`: names only)."""
    if clean.exists():
        shutil.rmtree(clean)
    clean.parent.mkdir(parents=True, exist_ok=True)
    vcs.reader_clone(str(source), clean, base)
    vcs.ignore_locally(clean, ignore)
    return vcs.foreign_changes(clean, work_tree, base, ignore, patch=patch)


def collect_candidate(
    workspace: Workspace, experiment: Experiment, result: JobResult, launcher: Launcher
) -> Candidate:
    """Read what the worker left: its patch, its bench's state, its report, its usage."""
    checkout = experiment.checkout
    worker = checkout.worker
    clean = workspace.judge_dir / f"collect-{experiment.name}"
    ignore = [f"/{REPORT_NAME}", f"/{BASELINE_COPY}/", *workspace.config.target.ignore, *launcher.scratch]
    try:
        target = _foreign(workspace.target_vcs, workspace.reference_target, worker.target_dir,
                          checkout.target_base, clean / "target", ignore)
        special = special_files.in_tree(workspace.target_vcs, clean / "target", worker.target_dir)
        special += special_files.in_patch(target.patch)
        bench_source, bench_base = worker_bench_source(workspace, worker.name, checkout.bench_base)
        # any file changed in the bench is tampering: its names are all that counts, no patch is made
        bench = _foreign(workspace.bench_vcs, bench_source, worker.bench_dir, bench_base, clean / "bench", [],
                         patch=False)
    finally:
        shutil.rmtree(clean, ignore_errors=True)
    special += [f"{d.name}/: the checkout itself was replaced by a symlink to {d.resolve()}"
                for d in (worker.target_dir, worker.bench_dir) if d.is_symlink()]  # another worker's, perhaps
    changed = _without_scratch(target.files, launcher.scratch)
    scope = list(experiment.hypothesis.scope)
    violations = outside_scope(changed, scope)
    reading = report_module.read_report(worker.report_path, experiment.name)
    log = result.log_path
    log_text = log_tail(log)
    error = launcher.agent_error(log_text, result.exit_code)

    binaries = binary_files(target.patch)
    patch_bytes = len(target.patch.encode("utf-8", errors="surrogateescape"))
    committed = target.head not in ("", checkout.target_base)
    flags = _flags(tampered=bool(bench.files) or bench.head not in ("", bench_base), violations=violations,
                   committed=committed, unchanged=not changed and not committed, binary=bool(binaries),
                   too_large=patch_bytes > workspace.config.target.max_patch_kb * 1024, report=reading.state,
                   timed_out=result.timed_out, cancelled=result.cancelled, exit_code=result.exit_code,
                   special=bool(special))
    refused = binaries or special or Flag.PATCH_TOO_LARGE in flags

    return Candidate(
        experiment=experiment.name,
        worker=worker.name,
        target_base=checkout.target_base,
        bench_base=checkout.bench_base,
        target_head=target.head,
        patch="" if refused else target.patch,
        patch_bytes=patch_bytes,
        binary_files=binaries,
        special_files=special,
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
        launcher_failure=None if error is None else error.message,
        agent_error=None if error is None else error.kind,
        flags=flags,
    )


def patch_files(patch: str) -> list[str]:
    """The files a patch touches, as git reads the patch (not as its sender listed them)."""
    if not patch.strip():
        return []
    out = subprocess.run(["git", "apply", "--numstat", "-z", "-"], input=patch.encode("utf-8", "surrogateescape"),
                         capture_output=True, check=False)
    if out.returncode != 0:
        return []  # a patch git cannot read; the judge's clean apply fails and says why
    files: list[str] = []
    fields = out.stdout.split(b"\0")
    index = 0
    while index < len(fields):
        entry = fields[index].decode("utf-8", "surrogateescape")
        if not entry:
            index += 1
            continue
        path = entry.split("\t", 2)[2] if entry.count("\t") >= 2 else ""
        if path:
            files.append(path)
            index += 1
        else:  # a rename: the old and the new path follow as their own fields
            files += [fields[index + 1].decode("utf-8", "surrogateescape"),
                      fields[index + 2].decode("utf-8", "surrogateescape")]
            index += 3
    return sorted(set(files))


def from_remote(workspace: Workspace, experiment: Experiment, outcome: RemoteOutcome, launcher: Launcher) -> Candidate:
    """A candidate from what a dask task sent back; the lab's own log, prompt and report copies are written."""
    checkout = experiment.checkout
    where = outcome.where
    log = workspace.log_path(experiment.name)
    log.parent.mkdir(parents=True, exist_ok=True)
    fetched = f", checkouts fetched from {outcome.fetched_from}" if outcome.fetched_from else ""
    log.write_text(f"[orchard] ran on dask worker {where}{fetched}; timings {outcome.timings}\n"
                   + (f"[orchard] {outcome.error}\n" if outcome.error else "") + outcome.log_tail,
                   encoding="utf-8")
    if outcome.prompt:
        workspace.prompt_path(experiment.name).write_text(outcome.prompt, encoding="utf-8")
    report_copy = workspace.logs_dir / f"{experiment.name}.report.json"
    report_copy.unlink(missing_ok=True)
    if outcome.report_text is not None:
        report_copy.write_text(outcome.report_text, encoding="utf-8")
    reading = report_module.read_report(report_copy, experiment.name)
    error = launcher.agent_error(outcome.log_tail, outcome.exit_code)
    changed = _without_scratch(tuple(patch_files(outcome.patch)), launcher.scratch)
    scope = list(experiment.hypothesis.scope)
    violations = outside_scope(changed, scope)
    committed = bool(outcome.target_head) and outcome.target_head != checkout.target_base
    binaries = binary_files(outcome.patch)
    special = special_files.in_patch(outcome.patch)
    patch_bytes = len(outcome.patch.encode("utf-8", errors="surrogateescape"))
    flags = _flags(tampered=bool(outcome.bench_files) or outcome.bench_head not in ("", checkout.bench_base),
                   special=bool(special), violations=violations, committed=committed,
                   unchanged=not changed and not committed,
                   binary=bool(binaries), too_large=patch_bytes > workspace.config.target.max_patch_kb * 1024,
                   report=reading.state, timed_out=outcome.timed_out, cancelled=False,
                   exit_code=outcome.exit_code)
    return Candidate(
        experiment=experiment.name, worker=checkout.worker.name, target_base=checkout.target_base,
        bench_base=checkout.bench_base, target_head=outcome.target_head,
        patch="" if binaries or special or Flag.PATCH_TOO_LARGE in flags else outcome.patch,
        patch_bytes=patch_bytes, binary_files=binaries, special_files=special,
        changed_files=changed, scope=scope, scope_violations=violations, bench_changes=list(outcome.bench_files),
        bench_head=outcome.bench_head, report=reading, log_path=str(log), exit_code=outcome.exit_code,
        signal=outcome.signal, duration_s=outcome.duration_s, started_at=outcome.started_at,
        usage=launcher.usage(outcome.log_tail), launcher=launcher.label,
        launcher_failure=None if error is None else error.message, agent_error=None if error is None else error.kind,
        flags=flags, host=where,
    )
