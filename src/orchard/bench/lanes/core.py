"""The `core` lane: `orchard bench core`.

What an agent pays to look at its own change in a large repository: on
generated repositories of N files (and one with large binary files), after a
typical agent edit, each subject's `status`, `diff`, `log` and `show`, as its
flow's `[core]` table spells them, are measured: wall time, tool calls,
output bytes, estimated tokens. Three absolute gates are checked on every
run; a gate failure fails the row whatever the speed:

- `information_recall`: every changed path (modified, added, both sides of
  the rename, deleted) appears in the status output and in the diff output,
  and every hunk header of the edit (computed with difflib) in the diff;
- `pipe_compatible_unified`: the diff output applies with the harness's
  `git apply --check --cached` to a clean copy of the repository's head;
- `determinism`: each command prints exactly what it printed in the
  subject's warm-up run.

The repositories are built once per campaign (and reused across campaigns)
from a content-hashed cache (`generated_repo`). Each subject gets its own
checkout from the flow's `acquire` commands; the edit is applied with plain
file operations and the flow's optional `stage` commands (untimed), then one
warm-up run (recorded, `warmup: true`, the determinism reference) and
`--runs` measured runs.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

from orchard import process
from orchard.bench.lanes.core_summary import TOTAL, summary
from orchard.bench.lanes.generated_repo import (
    Edit,
    GeneratedRepo,
    RepoSpec,
    ensure,
    typical_edit,
)
from orchard.bench.lanes.session import LaneResult, check_common, lane_context
from orchard.bench.lanes.steps import LaneContext, Recorder, Row, fail
from orchard.bench.suites.flows import CORE_MEASURED, Flow
from orchard.bench.suites.subjects import Subject
from orchard.errors import FixtureError, UsageError

LANE = "core"
SCENARIO = "core_v1"
TRANSPORT = "local_checkout"
NEEDS = tuple(f"[core] {key}" for key in ("acquire", *CORE_MEASURED))
DEFAULT_FILES = (1_000, 10_000, 50_000)
DEFAULT_RUNS = 5
BINARIES = (8, 8)  # the binary fixture: 8 files of 8 MiB beside the smallest text fixture
DEFAULT_STEP_TIMEOUT_S = 300.0
ADMITTED_CHARS = 8 * 1024 * 1024  # an agent reads all of it; gates need all of it
WARMUP_RUN = -1


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "orchard" / "core-fixtures"


def parse_files(text: str) -> list[int]:
    """`--files 1000,10000,50000`: file counts of at least 8."""
    counts: list[int] = []
    for part in text.split(","):
        part = part.strip().replace("_", "")
        if not part.isdecimal() or int(part) < 8:
            raise UsageError(f"--files {text!r}: {part!r} is not a file count of at least 8")
        counts.append(int(part))
    return list(dict.fromkeys(counts))


@dataclass
class CoreOptions:
    subjects: list[Subject]
    flows: Mapping[str, Flow]
    results: Path
    files: list[int] = field(default_factory=lambda: list(DEFAULT_FILES))
    binaries: bool = True
    runs: int = DEFAULT_RUNS
    cache: Path = field(default_factory=default_cache)
    keep_workdirs: bool = False
    step_timeout_s: float = DEFAULT_STEP_TIMEOUT_S
    workdir: Path | None = None

    def validate(self) -> None:
        check_common(self.runs, self.subjects)
        if not self.files:
            raise UsageError("--files: give at least one file count")

    def specs(self) -> list[RepoSpec]:
        specs = [RepoSpec(files) for files in self.files]
        if self.binaries:
            specs.append(RepoSpec(min(self.files), binaries=BINARIES[0], binary_mib=BINARIES[1]))
        return specs


@dataclass
class _Outputs:
    """What one run printed, per command (full stdout)."""

    stdout: dict[str, bytes] = field(default_factory=dict)

    def digest(self) -> dict[str, str]:
        return {key: hashlib.sha256(value).hexdigest() for key, value in self.stdout.items()}


def recall(edit: Edit, outputs: _Outputs) -> tuple[float, list[str]]:
    """Share of the edit's facts (paths in status and diff, hunk headers in diff) found; what is missing."""
    status = outputs.stdout.get("status", b"").decode("utf-8", errors="replace")
    diff = outputs.stdout.get("diff", b"").decode("utf-8", errors="replace")
    facts = [("status", path, status) for path in edit.paths]
    facts += [("diff", path, diff) for path in edit.paths]
    facts += [("diff", header, diff) for header in edit.hunk_headers]
    missing = [f"{where}: {fact}" for where, fact, text in facts if fact not in text]
    return round(1 - len(missing) / len(facts), 4), missing


def pipe_check(git: str, clean: Path, diff: bytes, env: Mapping[str, str]) -> str | None:
    """None when the diff applies to a clean copy of the head (`git apply --check --cached`), else why not."""
    if not diff.strip():
        return "the diff output is empty"
    capture = process.run([git, "apply", "--check", "--cached", "-"], cwd=clean, env=env, timeout_s=120, stdin=diff)
    if capture.ok:
        return None
    return "git apply --check: " + " ".join(capture.stderr_text.split())[-300:]


class _SubjectRun:
    """One subject on one fixture: checkout, edit, warm-up and measured runs."""

    def __init__(self, ctx: LaneContext, subject: Subject, flow: Flow, fixture: GeneratedRepo, clean: Path) -> None:
        self.ctx, self.subject, self.flow, self.fixture, self.clean = ctx, subject, flow, fixture, clean
        self.fields = {
            "remote_transport": TRANSPORT, "fixture_label": fixture.spec.label, "fixture_key": fixture.spec.key,
            "fixture_head": fixture.head, "files": fixture.spec.files, "binaries": fixture.spec.binaries,
            "binary_mib": fixture.spec.binary_mib, "benchmark_track": "core-equivalent",
        }
        self.workspace = ctx.root / f"{fixture.spec.label}-{subject.name}"
        self.values = {
            "bin": str(subject.bin), "root": str(ctx.root), "workspace": str(self.workspace),
            "fixture": str(fixture.path), "message": f"core lane {ctx.bench_id}",
        }
        self.reference: _Outputs | None = None

    def recorder(self, run: int) -> Recorder:
        ctx = replace(self.ctx, metadata={**self.ctx.metadata, "warmup": True}) if run == WARMUP_RUN else self.ctx
        return Recorder(ctx, self.subject, SCENARIO, run, fields=self.fields, fixture_id=self.fixture.fixture_id)

    def prepare(self) -> Edit:
        """Untimed: the flow's acquire, the edit, the flow's stage."""
        setup = self.recorder(WARMUP_RUN)
        self.setup(setup, "acquire")
        edit = typical_edit(self.fixture.spec, self.workspace)
        self.setup(setup, "stage")
        return edit

    def setup(self, rec: Recorder, key: str) -> None:
        for index, command in enumerate(self.flow.core.get(key, ())):
            capture = rec.flow_harness(f"setup.{key}.{index}", command, self.values)
            if not capture.ok:
                raise FixtureError(f"[core] {key} failed: {' '.join(capture.stderr_text.split())[-300:]}")

    def measure(self, run: int, edit: Edit) -> Row:
        rec = self.recorder(run)
        outputs = _Outputs()
        for key in CORE_MEASURED:
            for command in self.flow.core[key]:
                operation = f"core.{key}" + (f".{command.name}" if len(self.flow.core[key]) > 1 else "")
                rec.command(operation, command, self.values, extra={"phase": self.fixture.spec.label, "flow_step": key})
                capture = rec.last_capture
                outputs.stdout[key] = outputs.stdout.get(key, b"") + (capture.stdout if capture is not None else b"")
        score, missing = recall(edit, outputs)
        pipe_error = pipe_check(self.ctx.git, self.clean, outputs.stdout.get("diff", b""), self.ctx.env)
        deterministic: bool | None = None
        changed: list[str] = []
        if self.reference is None:
            self.reference = outputs
        else:
            reference = self.reference.digest()
            changed = [key for key, digest in outputs.digest().items() if reference.get(key) != digest]
            deterministic = not changed
        by_step = {key: _sum_ms(rec.counted, key) for key in CORE_MEASURED}
        total = rec.total(
            TOTAL,
            information_recall=score,
            information_recall_missing=missing[:20],
            pipe_compatible_unified=pipe_error is None,
            pipe_check_error=pipe_error,
            determinism=deterministic,
            determinism_changed=changed,
            determinism_reference="this subject's warm-up run on the same checkout",
            output_sha256=outputs.digest(),
            edit_paths=list(edit.paths),
            edit_hunk_headers=list(edit.hunk_headers),
            output_bytes=sum(int(r.get("stdout_bytes") or 0) + int(r.get("stderr_bytes") or 0) for r in rec.counted),
            flow_notes=self.flow.notes,
            **{f"{key}_ms": ms for key, ms in by_step.items()},
        )
        gates = {
            "information_recall": None if score == 1 else f"{score:g} < 1 (missing {'; '.join(missing[:5])})",
            "pipe_compatible_unified": pipe_error,
            "determinism": None
            if deterministic is not False
            else f"{', '.join(changed)} output differs from the warm-up run",
        }
        total["gates_failed"] = [name for name, problem in gates.items() if problem]
        if total["gates_failed"]:
            reasons = [f"gate {name}: {gates[name]}" for name in total["gates_failed"]]
            fail(total, "; ".join(reasons + ([total["failure_reason"]] if total.get("failure_reason") else [])))
        return rec.emit_total(total)


def _sum_ms(counted: Sequence[Row], step: str) -> float | None:
    values = [float(r["elapsed_ms"]) for r in counted if r.get("flow_step") == step and r.get("elapsed_ms") is not None]
    return round(sum(values), 3) if values else None


def run_lane(options: CoreOptions, out: TextIO | None = None) -> LaneResult:
    """Measure every (fixture, subject); returns where the rows went. UsageError before anything runs."""
    options.validate()
    out = out or sys.stderr
    with lane_context(
        LANE,
        options,
        summary,
        out,
        admitted_chars=ADMITTED_CHARS,
        metadata={"runs": options.runs},
    ) as (session, ctx):
        for spec in options.specs():
            print(f"[fixture] {spec.label} (cache {options.cache})", file=out, flush=True)
            try:
                fixture = ensure(spec, options.cache, ctx.git, ctx.env)
            except FixtureError as error:
                for subject in options.subjects:
                    rec = Recorder(
                        ctx, subject, SCENARIO, 0, fields={"remote_transport": TRANSPORT, "fixture_label": spec.label}
                    )
                    rec.emit_total(fail(rec.total(TOTAL), f"fixture: {error}"))
                continue
            print(
                f"[fixture] {spec.label}: {'built' if fixture.built else 'cached'} at {fixture.path} "
                f"({fixture.head[:12]})",
                file=out,
                flush=True,
            )
            # The pipe check's clean copy: the fixture's head in an index, no files written.
            clean = session.root / f"clean-{spec.label}"
            process.run(
                [ctx.git, "clone", "-q", "--shared", "--no-checkout", str(fixture.path), str(clean)],
                env=ctx.env,
                timeout_s=600,
            )
            process.run([ctx.git, "read-tree", "HEAD"], cwd=clean, env=ctx.env, timeout_s=600)
            for subject in options.subjects:
                _run_subject(ctx, subject, options, fixture, clean, out)
            shutil.rmtree(clean, ignore_errors=True)
    return session.result()


def _run_subject(
    ctx: LaneContext, subject: Subject, options: CoreOptions, fixture: GeneratedRepo, clean: Path, out: TextIO
) -> None:
    fields = {"remote_transport": TRANSPORT, "fixture_label": fixture.spec.label, "files": fixture.spec.files}
    flow = options.flows[subject.kind]
    reason = subject.absent_reason if subject.bin is None else flow.skip_reason(LANE, NEEDS)
    if reason:
        Recorder(ctx, subject, SCENARIO, 0, fields=fields, fixture_id=fixture.fixture_id).skip(reason)
        return
    one = _SubjectRun(ctx, subject, flow, fixture, clean)
    try:
        try:
            edit = one.prepare()
        except FixtureError as error:
            rec = one.recorder(0)
            rec.emit_total(fail(rec.total(TOTAL), f"fixture: {error}"))
            return
        for run in (WARMUP_RUN, *range(options.runs)):
            print(f"[run] core {fixture.spec.label} run={run} subject={subject.name}", file=out, flush=True)
            one.measure(run, edit)
    finally:
        if not options.keep_workdirs:
            shutil.rmtree(one.workspace, ignore_errors=True)


