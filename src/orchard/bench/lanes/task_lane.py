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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from orchard.bench.lanes import agent_task, interrupted, materialization, task_loop
from orchard.bench.lanes.remotes import (
    GIT_REMOTE_MODES,
    git_remote,
    oak_remote,
)
from orchard.bench.lanes.session import LaneResult, check_common, lane_context
from orchard.bench.lanes.steps import LaneContext, Recorder, fail
from orchard.bench.lanes.task_lane_summary import summary
from orchard.bench.suites.flows import Flow
from orchard.bench.suites.subjects import Subject
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


