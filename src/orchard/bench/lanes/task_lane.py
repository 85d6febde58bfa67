"""The `task-loop` lane: `orchard bench task-loop`.

Runs the chosen scenarios for every subject, `--runs` times, under the
machine-wide measurement lock, writing rows as they are measured to
`results/task-loop/<stamp>.jsonl` with a Markdown summary beside it. A
subject without a binary, a flow without what a scenario needs, or a remote
that is not configured gives skip rows that say why. Every workspace, server
and proxy the lane starts is removed or stopped on the way out (also on
Ctrl-C), unless `--keep-workdirs` keeps the workspaces for inspection.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from orchard.bench import rows
from orchard.bench.flows import Flow
from orchard.bench.lanes import agent_task, interrupted, materialization, task_loop
from orchard.bench.lanes.remotes import (
    GIT_REMOTE_MODES,
    git_remote,
    oak_remote,
)
from orchard.bench.lanes.session import LaneResult, check_common, lane_context
from orchard.bench.lanes.steps import LaneContext, Recorder, fail
from orchard.bench.lanes.summary import (
    notes_section,
    oracle_cell,
    skips_and_failures,
    subjects_section,
    summarized,
    table,
    warmup_line,
)
from orchard.bench.subjects import Subject
from orchard.errors import FixtureError, UsageError

LANE = "task-loop"
DEFAULT_STEP_TIMEOUT_S = 120.0
DEFAULT_ADMITTED_CHARS = 20_000
SCENARIOS = (
    task_loop.SCENARIO,
    agent_task.SCENARIO,
    agent_task.OAK_LOCAL_SCENARIO,
    materialization.SCENARIO,
    interrupted.SCENARIO,
)


def parse_scenarios(text: str | None) -> list[str]:
    """`--scenarios a,b`: unknown names are a usage error that lists the valid ones."""
    names = [part.strip() for part in (text or task_loop.SCENARIO).split(",") if part.strip()]
    unknown = [name for name in names if name not in SCENARIOS]
    if unknown or not names:
        raise UsageError(
            f"unknown scenario {', '.join(unknown) or '(none given)'}; valid: {', '.join(SCENARIOS)}"
        )
    return list(dict.fromkeys(names))


@dataclass
class TaskLoopOptions:
    subjects: list[Subject]
    flows: Mapping[str, Flow]
    results: Path
    runs: int = 3
    git_remote: str = "local"
    scenarios: list[str] = field(default_factory=lambda: [task_loop.SCENARIO])
    keep_workdirs: bool = False
    step_timeout_s: float = DEFAULT_STEP_TIMEOUT_S
    admitted_chars: int = DEFAULT_ADMITTED_CHARS
    workdir: Path | None = None  # parent of the run's temporary directory

    def validate(self) -> None:
        check_common(self.runs, self.subjects)
        if self.git_remote not in GIT_REMOTE_MODES:
            raise UsageError(f"--git-remote {self.git_remote!r}: choose one of {', '.join(GIT_REMOTE_MODES)}")


Scenario = Callable[[LaneContext, Subject, Flow, int, TaskLoopOptions], None]
WARMUP_RUN = -1


def _with_git_remote(
    runner: Callable[[LaneContext, Subject, Flow, Any, int], Any], scenario: str
) -> Scenario:
    """Make the run's remote (or a skip row saying why there is none), then run."""

    def run(ctx: LaneContext, subject: Subject, flow: Flow, run_index: int, options: TaskLoopOptions) -> None:
        if flow.remote == "git":
            remote = git_remote(
                options.git_remote, ctx.servers, ctx.root, f"{scenario}-{subject.name}-r{run_index}", ctx.env
            )
        else:
            remote = oak_remote()
        if isinstance(remote, str):
            mode = {"remote_transport": options.git_remote if flow.remote == "git" else "oak_server"}
            Recorder(ctx, subject, scenario, run_index, fields=mode).skip(remote)
            return
        runner(ctx, subject, flow, remote, run_index)

    return run


def _agent_task(ctx: LaneContext, subject: Subject, flow: Flow, run_index: int, options: TaskLoopOptions) -> None:
    reason = flow.skip_reason(agent_task.SCENARIO, ["[agent_task]"])
    if reason:
        Recorder(ctx, subject, agent_task.SCENARIO, run_index).skip(reason)
        return
    _with_git_remote(agent_task.run, agent_task.SCENARIO)(ctx, subject, flow, run_index, options)


def _served(ctx: LaneContext, subject: Subject, flow: Flow, run_index: int, options: TaskLoopOptions) -> None:
    reason = flow.skip_reason(agent_task.OAK_LOCAL_SCENARIO, agent_task.SERVED_NEEDS)
    if reason:
        Recorder(ctx, subject, agent_task.OAK_LOCAL_SCENARIO, run_index).skip(reason)
        return
    agent_task.run_served(ctx, subject, flow, run_index)


def _interrupted(ctx: LaneContext, subject: Subject, flow: Flow, run_index: int, options: TaskLoopOptions) -> None:
    reason = flow.skip_reason(interrupted.SCENARIO, interrupted.NEEDS)
    if reason:
        Recorder(ctx, subject, interrupted.SCENARIO, run_index).skip(reason)
        return
    interrupted.run(ctx, subject, flow, run_index)


DISPATCH: dict[str, Scenario] = {
    task_loop.SCENARIO: _with_git_remote(task_loop.run, task_loop.SCENARIO),
    agent_task.SCENARIO: _agent_task,
    agent_task.OAK_LOCAL_SCENARIO: _served,
    interrupted.SCENARIO: _interrupted,
}


def run_lane(options: TaskLoopOptions, out: TextIO | None = None) -> LaneResult:
    """Measure; returns where the rows went. Raises UsageError before measuring anything."""
    options.validate()
    out = out or sys.stderr
    with lane_context(
        LANE,
        options,
        summary,
        out,
        admitted_chars=options.admitted_chars,
        metadata={"git_remote_mode": options.git_remote, "runs": options.runs},
    ) as (session, ctx):
        if materialization.SCENARIO in options.scenarios:
            materialization.run_campaign(ctx, options.subjects, options.flows, options.runs)
        scenarios = [name for name in options.scenarios if name != materialization.SCENARIO]
        # One warm-up run per subject and scenario (first-run costs: page cache,
        # fixtures): recorded with `warmup: true`, never summarized.
        warm = replace(ctx, metadata={**ctx.metadata, "warmup": True})
        for subject in options.subjects:
            for scenario in scenarios:
                if subject.bin is not None:
                    print(f"[warm-up] {scenario} subject={subject.name}", file=out, flush=True)
                    _run_one(warm, scenario, subject, WARMUP_RUN, options)
        for run_index in range(options.runs):
            for subject in options.subjects:
                for scenario in scenarios:
                    print(f"[run] {scenario} run={run_index} subject={subject.name}", file=out, flush=True)
                    _run_one(ctx, scenario, subject, run_index, options)
    return session.result()


def _run_one(ctx: LaneContext, scenario: str, subject: Subject, run_index: int, options: TaskLoopOptions) -> None:
    """One scenario for one subject; an absent binary or a broken fixture is a row, not a crash."""
    if subject.bin is None:
        Recorder(ctx, subject, scenario, run_index).skip(subject.absent_reason or "no binary")
        return
    try:
        DISPATCH[scenario](ctx, subject, options.flows[subject.kind], run_index, options)
    except FixtureError as error:
        rec = Recorder(ctx, subject, scenario, run_index)
        rec.emit_total(fail(rec.total(f"{scenario}.total"), f"fixture: {error}"))


HEADER = [
    "# Task loop summary",
    "",
    "Whole-task cost of an agent's loop: acquire a workspace, inspect, edit, snapshot,",
    "publish, describe, end; then a follow-up task in a fresh workspace, with each",
    "subject's commands taken from its flow. Command sequences are not step-equivalent",
    "across subjects: the flows' notes below say where they differ. Latency is compared",
    "only between rows of the same transport; across transports only tool calls and",
    "estimated tokens are comparable.",
]


def _totals(all_rows: Sequence[Mapping[str, Any]], operation: str) -> list[Mapping[str, Any]]:
    return [row for row in all_rows if row.get("operation") == operation]


def summary(recorded: Sequence[Mapping[str, Any]]) -> str:
    """The lane's Markdown summary: one section per scenario that produced totals."""
    lines = list(HEADER)
    all_rows = summarized(recorded)
    machine = next((row.get("machine_fingerprint") for row in recorded), None)
    lock = next((row.get("measurement_lock") for row in recorded), None)
    lines += ["", f"Machine fingerprint `{machine}`; measurement lock {lock}."]
    lines += warmup_line(recorded)
    lines += subjects_section(recorded)
    lines += [""]
    loop = sorted(_totals(all_rows, task_loop.TOTAL), key=lambda r: (str(r.get("remote_transport")), r["run"]))
    if loop:
        transports = sorted({str(r.get("remote_transport")) for r in loop})
        lines += ["## task_loop", ""]
        if len(transports) > 1:
            lines += [
                f"Transports in this table: {', '.join(transports)}. Wall ms, warm delta and network",
                "bytes compare only within one transport; tool calls and tokens compare across them.",
                "",
            ]
        lines += table(
            (
                "Subject",
                "Run",
                "Transport",
                "Wall ms",
                "Tool calls",
                "Est. tokens",
                "Describe calls",
                "Warm delta ms",
                "Network bytes",
                "Oracle",
            ),
            (
                (
                    f"`{r['subject']}`",
                    r["run"],
                    r.get("remote_transport"),
                    r.get("elapsed_ms"),
                    r.get("tool_call_count"),
                    r.get("estimated_total_tokens"),
                    r.get("describe_calls"),
                    r.get("followup_warm_delta_ms"),
                    r.get("network_bytes"),
                    oracle_cell(r.get("oracle_payload_on_remote_branch")),
                )
                for r in loop
            ),
        )
    agent = _totals(all_rows, agent_task.TOTAL) + _totals(all_rows, agent_task.OAK_LOCAL_TOTAL)
    if agent:
        lines += [
            "",
            "## agent_task",
            "",
            "The phases of each flow's [agent_task] (for git: cold, a fresh full clone; warm, a",
            "worktree sharing the cold clone's objects). Hosted CI is unmeasured here (coverage partial).",
            "",
        ]
        lines += table(
            (
                "Subject",
                "Scenario",
                "Run",
                "Transport",
                "Wall ms",
                "Tool calls",
                "Est. tokens",
                "Output bytes",
                "Coverage",
                "Oracle",
            ),
            (
                (
                    f"`{r['subject']}`",
                    r["scenario"],
                    r["run"],
                    r.get("remote_transport"),
                    r.get("elapsed_ms"),
                    r.get("tool_call_count"),
                    r.get("estimated_total_tokens"),
                    (r.get("stdout_bytes") or 0) + (r.get("stderr_bytes") or 0),
                    "complete" if r.get("coverage_complete") else "partial",
                    oracle_cell(r.get("oracle_payload_on_remote_branch")),
                )
                for r in agent
            ),
        )
    lines += materialization.summary_section(_totals(all_rows, materialization.TOTAL))
    broken = _totals(all_rows, interrupted.TOTAL)
    if broken:
        lines += [
            "",
            "## interrupted_publication_after_request_v1",
            "",
            "The fixture reads one complete publication request and hangs up without answering.",
            "What the CLI claimed and what the fixture saw are separate columns; the harness never retries.",
            "",
        ]
        lines += table(
            (
                "Subject",
                "Run",
                "CLI exit",
                "CLI claim",
                "Fixture saw",
                "Requests",
                "Request bytes",
                "Head kept",
                "Work kept",
                "Result",
            ),
            (
                (
                    f"`{r['subject']}`",
                    r["run"],
                    r.get("cli_returncode"),
                    r.get("publication_outcome"),
                    r.get("fixture_delivery_state"),
                    r.get("mutation_requests_observed"),
                    r.get("network_request_bytes_observed"),
                    r.get("local_head_preserved"),
                    r.get("local_work_preserved"),
                    "pass" if not rows.is_failure(r) else "FAIL",
                )
                for r in broken
            ),
        )
    lines += notes_section(all_rows)
    lines += skips_and_failures(recorded)
    return "\n".join(lines) + "\n"
