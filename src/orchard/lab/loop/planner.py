"""`orchard plan`: ask the configured agent for 3-6 hypotheses.

The planner gets what the lab knows (the opportunities ranking, the journal
so far, the leaderboard, the target's layout) and the hypothesis format,
runs like any worker (its own checkout of main, its own window), and must
write a TOML file of [[hypothesis]] tables. orchard validates every one
before anything enters the backlog: a malformed answer is rejected whole,
with the reasons, and nothing is added.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from orchard.errors import OrchardError, UsageError
from orchard.lab.config.sections import ExecutorKind
from orchard.lab.db.state import LabState
from orchard.lab.judge.measuring import opportunities
from orchard.lab.loop import backlog
from orchard.lab.loop.near_duplicates import sorted_out
from orchard.lab.notebook import backlog_file
from orchard.lab.notebook import files as records
from orchard.lab.notebook.journal import render_journal
from orchard.lab.records.events import BacklogChanged
from orchard.lab.records.experiment import Experiment
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.workers.executors import ProcessExecutor, make_executor
from orchard.lab.workers.jobs.job import Job, JobResult
from orchard.lab.workers.launchers.launcher_base import Launcher
from orchard.lab.workers.launchers.launchers import make_launcher, preflight
from orchard.lab.workers.workspace.workspace import Workspace

MIN_HYPOTHESES, MAX_HYPOTHESES = 3, 6
LAYOUT_FILES = 200


class PlannerRejected(OrchardError):
    """The planner's answer is not a valid set of hypotheses."""


def _layout(ws: Workspace, checkout: Path) -> str:
    files = sorted(str(p.relative_to(checkout)) for p in checkout.rglob("*")
                   if p.is_file() and ".git" not in p.parts and "build" not in p.parts)
    shown = files[:LAYOUT_FILES]
    more = f"\n... and {len(files) - len(shown)} more" if len(files) > len(shown) else ""
    return "\n".join(shown) + more


def planning_prompt(ws: Workspace, state: LabState, checkout: Path, output: Path) -> str:
    template = resources.files("orchard.lab").joinpath("templates/planner.md").read_text(encoding="utf-8")
    ranked = opportunities(ws)
    lines = [f"- {o.scenario}/{o.operation} {o.metric}: {o.subject} {o.value} vs {o.comparator} "
             f"{o.comparator_value} (gap {o.gap}; where: {o.places()})" for o in ranked[:15]]
    fields = {
        "target_dir": str(checkout),
        "output": str(output),
        "opportunities": "\n".join(lines) or "(no opportunities ranking yet)",
        "leaderboard": records.render_leaderboard(records.board(state)),
        "journal": render_journal(state, records=False)[-12000:],
        "backlog": backlog_file.render(state),
        "layout": _layout(ws, checkout),
        "format": resources.files("orchard.lab").joinpath("templates/hypothesis-format.toml").read_text(),
        "min": str(MIN_HYPOTHESES),
        "max": str(MAX_HYPOTHESES),
    }
    for key, value in fields.items():
        template = template.replace("{{" + key + "}}", value)
    return template


def read_plan(path: Path, state: LabState) -> list[Hypothesis]:
    """Validate the planner's file; every problem named, nothing half-accepted."""
    if not path.is_file():
        raise PlannerRejected(f"the planner wrote no hypotheses file at {path}")
    try:
        hypotheses = backlog.load_file(path)
    except UsageError as error:
        raise PlannerRejected(f"the planner's hypotheses were rejected: {error}") from None
    problems = []
    if not MIN_HYPOTHESES <= len(hypotheses) <= MAX_HYPOTHESES:
        problems.append(f"expected {MIN_HYPOTHESES}-{MAX_HYPOTHESES} hypotheses, got {len(hypotheses)}")
    problems += [f"{h.id}: already in the backlog" for h in hypotheses if state.has_hypothesis(h.id)]
    problems += [f"{h.id}: no suspected cause (say where in the code)" for h in hypotheses if not h.suspected_cause]
    problems += [f"{h.id}: no scope (name the files it may touch)" for h in hypotheses if not h.scope]
    if problems:
        raise PlannerRejected(f"the planner's hypotheses were rejected ({path}): " + "; ".join(problems))
    return hypotheses


def _plan_name(ws: Workspace) -> str:
    """A name no earlier plan used: a second plan within the same second must not read the first's answer."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    name, count = f"plan-{stamp}", 1
    while ws.prompt_path(name).exists() or (ws.prompts_dir / f"{name}.toml").exists():
        count += 1
        name = f"plan-{stamp}-{count}"
    return name


@dataclass(frozen=True)
class PlanRun:
    """A planner started: its job, and the file its answer must be in."""

    name: str
    job: Job
    output: Path
    launcher: Launcher


def start_plan(ws: Workspace, state: LabState, executor: ProcessExecutor, *,
               say: Callable[[str], None] = print) -> PlanRun:
    """Start the planner (the lab's launcher) on `executor` in its own checkout of main."""
    launcher = make_launcher(ws.config.launcher)
    if launcher.name == "patch":
        raise UsageError("the patch launcher has no model to plan with: add hypotheses with `orchard backlog add`")
    name = _plan_name(ws)
    checkout = ws.setup_worker("planner", ignore=launcher.scratch)
    output = checkout.worker.home_dir / f"{name}.toml"  # the sandbox lets it write there; kept in prompts/ after
    hypothesis = Hypothesis(metric="(planning)", change="propose hypotheses", id="planning", title="planning")
    job = launcher.job(ws, Experiment(name, hypothesis, checkout))
    ws.prompt_path(name).write_text(planning_prompt(ws, state, checkout.worker.target_dir, output), encoding="utf-8",
                                    errors="surrogateescape")  # the backlog's titles as given
    say(f"planner {name}: running {launcher.name}; it writes {output}")
    executor.start(job)
    return PlanRun(name, job, output, launcher)


def finish_plan(ws: Workspace, state: LabState, run: PlanRun, result: JobResult, *,
                say: Callable[[str], None] = print) -> list[Hypothesis]:
    """Validate the planner's answer; add its hypotheses to the backlog (all or none), but for near-duplicates of
    earlier ones, each refused and said; a plan of nothing else is rejected (a refill asks no more this run)."""
    if not result.ok:
        log = result.log_path.read_text(encoding="utf-8", errors="replace") if result.log_path.exists() else ""
        said = run.launcher.failure(log, result.exit_code)
        raise PlannerRejected(f"the planner ended with exit {result.exit_code} "
                              f"({said or result.reason or 'failed'}); log: {result.log_path}")
    if run.output.is_file():
        shutil.copyfile(run.output, ws.prompts_dir / run.output.name)  # the record of what it answered
    hypotheses, refused = sorted_out(state, read_plan(run.output, state))
    reasons = tuple(r.reason() for r in refused)
    if not hypotheses:
        raise PlannerRejected(f"the planner proposed only near-duplicates ({run.output}): " + "; ".join(reasons))
    with state.transaction():
        for h in hypotheses:
            backlog.add(state, h, source="planner")
        state.log(BacklogChanged(planner=run.name, added=tuple(h.id for h in hypotheses), refused=reasons or None))
    for reason in reasons:
        say(f"planner {run.name}: {reason}")
    records.write_atomic(ws.root / "backlog.md", backlog_file.render(state))
    return hypotheses


def plan(ws: Workspace, state: LabState, *, say: Callable[[str], None] = print) -> list[Hypothesis]:
    """Run the planner once (its launcher checked first: it can run, its agent is logged in); add its
    hypotheses to the backlog and return them."""
    for note in preflight(ws.config, [make_launcher(ws.config.launcher)], "nothing was planned", ws.root):
        say(note)
    configured = ws.config.workers.executor
    kind = ExecutorKind.SUBPROCESS if configured == ExecutorKind.DASK else configured  # plans run here
    with make_executor(kind, ws.tmux_socket, ws.executor_dir) as executor:
        run = start_plan(ws, state, executor, say=say)
        results = executor.wait()
    return finish_plan(ws, state, run, results[0], say=say)
