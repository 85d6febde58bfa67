"""Running a scenario's commands and turning them into rows.

A `Recorder` belongs to one (subject, scenario, run). Agent-facing commands
(the flow's steps) become step rows that count in the scenario's total;
harness commands (fixtures, probes, oracles) become `harness` rows that are
written but never counted as the agent's tool calls or tokens. Every row is
handed to the lane's writer as soon as it exists, so a crash keeps it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchard import process
from orchard.bench.lanes.transport import ByteProxy, LoopbackServers
from orchard.bench.measuring import rows, tokens
from orchard.bench.suites.flows import Command, Flow, Probe
from orchard.bench.suites.subjects import Subject

Row = dict[str, Any]
INSTRUCTION_LEVEL = "scripted_flow"


@dataclass
class LaneContext:
    """What every scenario of one lane run shares."""

    bench_id: str
    root: Path
    env: dict[str, str]
    metadata: dict[str, Any]
    servers: LoopbackServers
    sink: Callable[[Row], None]
    step_timeout_s: float
    admitted_chars: int
    git: str  # the harness's own git: fixtures and oracles, never the subject


def failed_step_reason(row: Row) -> str:
    """`step task.publish failed (exit 128): <stderr tail>`: what a reader needs first."""
    how = "timed out" if row.get("timed_out") else f"failed (exit {row.get('process_returncode')})"
    tail = " ".join(str(row.get("stderr_tail") or "").split())[-300:]
    return f"step {row.get('operation')} {how}" + (f": {tail}" if tail else "")


def fail(total: Row, reason: str) -> Row:
    """Mark a total row failed with the reason a reader needs."""
    total["returncode"] = 1
    total["failure_reason"] = reason
    return total


class Recorder:
    """Runs and records the commands of one subject in one scenario run."""

    def __init__(
        self,
        ctx: LaneContext,
        subject: Subject,
        scenario: str,
        run: int,
        *,
        fields: Mapping[str, Any] | None = None,
        fixture_id: str | None = None,
        proxy: ByteProxy | None = None,
        stand_ins: Mapping[str, str] | None = None,
        instruction_level: str = INSTRUCTION_LEVEL,
    ) -> None:
        self.ctx = ctx
        self.subject = subject
        self.scenario = scenario
        self.run_index = run
        self.proxy = proxy
        fields = dict(fields or {})
        self.meta: dict[str, Any] = {
            **ctx.metadata,
            **subject.row_fields(),
            **fields,
            **rows.comparability(
                remote_transport=fields.get("remote_transport"),
                instruction_level=instruction_level,
                fixture_id=fixture_id or scenario,
            ),
        }
        # what the counted command line shows instead of this run's paths and names
        self.stand_ins = tokens.StandIns.of(
            {
                **({} if subject.bin is None else {str(subject.bin): "BIN"}),
                str(ctx.root): "ROOT",
                ctx.bench_id: "BENCH_ID",
                subject.name: "SUBJECT",
                **(stand_ins or {}),
            }
        )
        self.counted: list[Row] = []
        self.harness_commands = 0
        self.last_capture: process.Capture | None = None

    def _at(self, operation: str) -> dict[str, Any]:
        """Where a row of this recorder stands: subject, scenario, operation, run, metadata."""
        return {"subject": self.subject.identity(), "scenario": self.scenario, "operation": operation,
                "run": self.run_index, "metadata": self.meta}

    def _emit(self, row: Row, counted: bool) -> Row:
        self.ctx.sink(row)
        if counted:
            self.counted.append(row)
        return row

    def execute(
        self,
        operation: str,
        argv: Sequence[str],
        cwd: Path,
        *,
        kind: str = "vcs",
        expected: Sequence[int] = (0,),
        extra: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        stand_ins: tokens.StandIns | None = None,
    ) -> Row:
        """One agent-facing tool call, measured (`env` laid over the pinned environment)."""
        if self.proxy is not None:
            self.proxy.reset()
        row = self._measure(
            operation, argv, cwd, {**self.ctx.env, **(env or {})}, kind, expected, 1, stand_ins or self.stand_ins
        )
        if self.proxy is not None:
            row.update(self.proxy.counts().row_fields())
        row.update(extra or {})
        return self._emit(row, counted=True)

    def _measure(
        self,
        operation: str,
        argv: Sequence[str],
        cwd: Path,
        env: Mapping[str, str],
        kind: str,
        expected: Sequence[int],
        tool_calls: int,
        stand_ins: tokens.StandIns,
    ) -> Row:
        capture = process.run(
            list(argv),
            cwd=cwd,
            env=env,
            timeout_s=self.ctx.step_timeout_s,
            admitted_chars=self.ctx.admitted_chars,
        )
        self.last_capture = capture
        return rows.step_row(
            capture,
            **self._at(operation),
            step_kind=kind,
            expected_returncodes=expected,
            tool_calls=tool_calls,
            stand_ins=stand_ins,
        )

    def command(
        self,
        operation: str,
        command: Command,
        values: Mapping[str, Any],
        *,
        expected: Sequence[int] = (0,),
        extra: Mapping[str, Any] | None = None,
    ) -> Row:
        """A flow command: rendered, run in its cwd, or recorded as unmeasured."""
        if command.unmeasured:
            return self.unmeasured(operation, command.unmeasured)
        return self.execute(
            operation,
            command.render(values),
            Path(values[command.cwd]),
            kind=command.kind,
            expected=expected,
            extra=extra,
            env=command.environment(values),
            stand_ins=self.stand_ins.merged(self.outside_root(values)),
        )

    def outside_root(self, values: Mapping[str, Any]) -> dict[str, str]:
        """Stand-ins for the paths and URLs a command is given that lie outside the lane's root.

        Paths under the root already count as `ROOT/...`; anything else a
        lane passes (the core lane's --cache directory, a server's URL with
        its port, a temp dir) counts as its placeholder's name (`FIXTURE`,
        `REMOTE`), so a count never depends on where it lives.
        """
        root = str(self.ctx.root)
        known = dict(self.stand_ins.pairs)  # the binary stays BIN even where another placeholder holds its path
        found: dict[str, str] = {}
        for name, value in values.items():
            outside = isinstance(value, str) and (value.startswith("/") or "://" in value) and not (
                value == root or value.startswith(root + "/")
            )
            if outside and value not in known:
                found.setdefault(value, name.upper())
        return found

    def flow_step(self, phase: str, step: str, commands: Sequence[Command], values: Mapping[str, Any]) -> bool:
        """Every command of one flow step; stops at the first failure."""
        for command in commands:
            operation = f"{phase}.{step}" + (f".{command.name}" if len(commands) > 1 else "")
            row = self.command(operation, command, values, extra={"phase": phase, "flow_step": step})
            if rows.is_failure(row):
                return False
        return True

    def unmeasured(self, operation: str, reason: str) -> Row:
        """A step an agent would take that cannot be measured here (listed in the total)."""
        row = rows.skip_row(
            **self._at(operation),
            reason=reason,
        )
        return self._emit(row, counted=True)

    def row(self, operation: str, step_kind: str) -> Row:
        """A row of this subject and run that a lane fills in itself (a worker's or a race's total)."""
        return rows.base_row(
            **self._at(operation),
            step_kind=step_kind,
        )

    def skip(self, reason: str, operation: str | None = None) -> Row:
        """The whole scenario is not measured for this subject, and why."""
        row = rows.skip_row(
            **self._at(operation or f"{self.scenario}.skipped"),
            reason=reason,
        )
        return self._emit(row, counted=False)

    def harness(
        self, operation: str, argv: Sequence[str], cwd: Path, env: Mapping[str, str] | None = None
    ) -> process.Capture:
        """A fixture, probe or oracle command: recorded, never counted as the agent's."""
        row = self._measure(
            operation, argv, cwd, {**self.ctx.env, **(env or {})}, "harness", (0,), 0, self.stand_ins
        )
        self.harness_commands += 1
        for field in (*tokens.TOKEN_FIELDS, "token_estimate_method", "counted_command"):
            row.pop(field, None)
        self._emit(row, counted=False)
        assert self.last_capture is not None
        return self.last_capture

    def flow_harness(self, operation: str, command: Command | Probe, values: Mapping[str, Any]) -> process.Capture:
        """A flow's set-up command (prepare, cleanup, acquire a fixture): harness, with the flow's env."""
        return self.harness(operation, command.render(values), Path(values[command.cwd]), command.environment(values))

    def probe(self, operation: str, probe: Probe, values: Mapping[str, Any]) -> str | None:
        """A probe's answer: group 1 of its pattern (or the whole match, or stdout)."""
        capture = self.flow_harness(operation, probe, values)
        if not capture.ok:
            return None
        text = capture.stdout_text
        if probe.pattern is None:
            return text.strip()
        match = re.search(probe.pattern, text, re.MULTILINE)
        if match is None:
            return None
        return match.group(1) if match.groups() else match.group(0)

    def verify_payload(self, flow: Flow, values: Mapping[str, Any], verifier: Path) -> bool:
        """The oracle: fetch the pushed branch, the payload must be in it.

        A git remote is read by the harness's own git (a fresh clone of the
        branch), so a subject cannot vouch for its own publication; other
        remotes are read by the flow's `verify` commands.
        """
        values = {**values, "verifier": str(verifier)}
        if flow.harness_verifies:
            argv = [
                self.ctx.git,
                "clone",
                "-q",
                "--branch",
                str(values["branch"]),
                str(values["remote"]),
                str(verifier),
            ]
            if not self.harness(f"{values['phase']}.verify", argv, Path(values["root"])).ok:
                return False
        for command in flow.steps.get("verify", ()):
            capture = self.flow_harness(
                f"{values['phase']}.verify" + (f".{command.name}" if command.name else ""), command, values
            )
            if not capture.ok:
                return False
        payload_file = verifier / flow.payload_file
        return payload_file.is_file() and str(values["payload"]) in payload_file.read_text(errors="replace")

    def total(self, operation: str, **extra: Any) -> Row:
        """The scenario's total over its counted rows (fails if any step failed)."""
        row = rows.total_row(
            self.counted,
            **self._at(operation),
        )
        row["harness_command_count"] = self.harness_commands
        failed = [r for r in self.counted if rows.is_failure(r)]
        row["failed_operations"] = [str(r["operation"]) for r in failed]
        if failed:
            row["failure_reason"] = failed_step_reason(failed[0])
        row.update(extra)
        return row

    def emit_total(self, row: Row) -> Row:
        return self._emit(row, counted=False)
