"""The lab's commands: `init`, `run`, `status`, `plan`, `report`, `recover`, `finalize`, `serve`, `demo` and `review`,
and the opening of a lab's workspace and lab.db they share with the backlog's commands."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from orchard.cli.options import budget_options, workspace_argument
from orchard.cli.output import ProgressBar, terminal_console
from orchard.errors import UsageError
from orchard.lab.config.sections import ExecutorKind
from orchard.lab.text import visible

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from orchard.lab.db.state import LabState
    from orchard.lab.records.hypothesis import Hypothesis
    from orchard.lab.workers.workspace.workspace import Workspace


@click.command()
@click.argument("directory", type=click.Path(path_type=Path))
@click.option(
    "--target", "target", required=True, metavar="REPO", help="The repository to optimize: a local path or a URL."
)
@click.option(
    "--bench",
    "bench",
    metavar="REPO",
    help="The harness repository; without it the lab keeps bench.suite in its own bench.",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Start from this orchard.toml (its repositories are replaced by --target/--bench).",
)
def init(directory: Path, target: str, bench: str | None, config_file: Path | None) -> None:
    """Create a lab workspace in DIRECTORY: layout, orchard.toml, reference clones."""
    from orchard.lab.workers.workspace.workspace_init import init_workspace

    workspace = init_workspace(directory, target, bench, config_file)
    click.echo(f"workspace  {workspace.root}")
    click.echo(f"config     {workspace.config_path}  (edit it, then `orchard run {workspace.root}`)")
    click.echo(f"target     {workspace.config.target.repo} at {workspace.target_base()}")
    bench_source = workspace.config.bench.repo or "built-in bench"
    click.echo(f"bench      {bench_source} at {workspace.bench_base()}")
    for warning in workspace.target_warnings():
        click.echo(f"warning: {warning}", err=True)


@contextlib.contextmanager
def open_lab(workspace: Path) -> Iterator[tuple[Workspace, LabState]]:
    """The workspace and its lab.db, closed again however the command ends."""
    from orchard.lab.db.state import LabState
    from orchard.lab.workers.workspace.workspace import Workspace

    ws = Workspace.open(workspace)
    state = LabState.open(ws.root)
    try:
        state.check_intact()
        yield ws, state
    finally:
        state.close()


def print_added(hypotheses: Sequence[Hypothesis]) -> None:
    for hypothesis in hypotheses:
        click.echo(f"added {visible(hypothesis.id)} (score {hypothesis.score:.2f}): {visible(hypothesis.title)}")


def _run_lab(ws: Workspace, state: LabState) -> str:
    """Run the loop with its log lines and a progress bar for each verdict; Ctrl-C exits 130."""
    from orchard.lab.loop.lab import Lab

    try:
        with ProgressBar() as bar:
            return Lab(ws, state, say=bar.say, measure_progress=bar.update).run()
    except KeyboardInterrupt:
        click.echo(f"interrupted: every worker was stopped; `orchard run {ws.root}` resumes from lab.db", err=True)
        sys.exit(130)


@click.command()
@workspace_argument
@budget_options
def run(workspace: Path, **budgets: float | None) -> None:
    """Run the research loop until a stop condition holds; on an existing lab, resume it (a budget given is
    written into orchard.toml's [stop] first, the spend so far kept)."""
    given = {key: value for key, value in budgets.items() if value is not None}
    if given:
        import getpass

        from orchard.lab.loop.steering import raise_limits

        with open_lab(workspace) as (ws, state):
            click.echo(raise_limits(ws, state, getpass.getuser(), given))
    with open_lab(workspace) as (ws, state):  # orchard.toml read again, with the limits raised
        reason = _run_lab(ws, state)
    click.echo(f"stopped: {visible(reason)}")
    click.echo(f"report:  {ws.root / 'FINAL_REPORT.md'}")


@click.command()
@workspace_argument
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.option("--watch", is_flag=True, help="Redraw the status in place every 2 s until Ctrl-C.")
def status(workspace: Path, as_json: bool, watch: bool) -> None:
    """Workers, backlog, leaderboard and lock state at a glance (or live, with --watch)."""
    import json as jsonlib

    from orchard.lab.db.state import LabState
    from orchard.lab.notebook import status as lab_status
    from orchard.lab.notebook import view
    from orchard.lab.workers.workspace.workspace import Workspace

    if as_json and watch:
        raise UsageError("--json and --watch: choose one (a JSON document, or a live display)")
    ws = Workspace.open(workspace)
    state = LabState.open_readonly(ws.root)  # status only reads, and never waits on the lab's writes
    try:
        state.check_intact()
        if watch:
            lab_status.watch(ws, state, terminal_console())
            return
        snapshot = view.build(ws, state)
    finally:
        state.close()
    if as_json:
        click.echo(jsonlib.dumps(lab_status.status(snapshot), indent=2, default=str))
    else:
        terminal_console().print(lab_status.render(snapshot))


@click.command()
@workspace_argument
def plan(workspace: Path) -> None:
    """Ask the configured agent for 3-6 new hypotheses; each is validated before it is added."""
    from orchard.lab.loop.planner import plan as run_plan

    with open_lab(workspace) as (ws, state):
        hypotheses = run_plan(ws, state, say=lambda text: click.echo(text, err=True))
    print_added(hypotheses)


@click.command()
@workspace_argument
def report(workspace: Path) -> None:
    """Write FINAL_REPORT.md and report.html from lab.db (also for a lab still running)."""
    from orchard.lab.notebook import files as records

    with open_lab(workspace) as (ws, state):
        records.write_notebook(ws, state, final=True)
    click.echo((ws.root / "FINAL_REPORT.md").read_text())


@click.command()
@click.argument("workspace", type=click.Path(path_type=Path))
def recover(workspace: Path) -> None:
    """Restore a damaged lab.db from its last good backup and replay JOURNAL.md's later entries."""
    from orchard.lab.notebook.recovery import recover as run_recover
    from orchard.lab.workers.workspace.workspace import Workspace

    done = run_recover(Workspace.open(workspace).root)
    click.echo("\n".join(done.lines()))


@click.command()
@workspace_argument
@click.option("--push", "push_branches", is_flag=True, help="Publish the review branches to the target repository.")
def finalize(workspace: Path, push_branches: bool) -> None:
    """The landed wins as review branches on the lab's starting main, each judged alone; REVIEW.md."""
    from orchard.lab.finalize.finalize import finalize as run_finalize

    done = run_finalize(workspace, push_branches=push_branches, say=lambda text: click.echo(text, err=True))
    click.echo("\n".join(done.lines()))


@click.command()
@workspace_argument
@click.option("--port", type=int, default=8765, show_default=True, help="Port to listen on (0: any free one).")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind; any other than 127.0.0.1 requires the token printed at start.",
)
def serve(workspace: Path, port: int, host: str) -> None:
    """A live web dashboard of the lab (workers, lock, backlog, experiments, lineage, journal, charts), with stop,
    pause and resume behind the token it prints."""
    from orchard.lab.loop.dashboard_controls import routes
    from orchard.lab.notebook.serve import serve as serve_dashboard

    serve_dashboard(workspace, host, port, say=lambda text: click.echo(text, err=True), controls=routes)


@click.command()
@click.option(
    "--workspace",
    type=click.Path(path_type=Path),
    default=None,
    help="Where to create the demo lab (default: ./orchard-demo-<time>).",
)
@click.option("--workers", type=int, default=3, show_default=True, help="Workers running at once.")
@click.option("--executor", type=click.Choice([kind.value for kind in ExecutorKind]), default=ExecutorKind.AUTO.value,
              show_default=True, help="Where workers run; dask: a LocalCluster orchard starts and stops itself.")
def demo(workspace: Path | None, workers: int, executor: str) -> None:
    """A whole lab run on the embedded demo target: every decision path, then FINAL_REPORT.md."""
    import shutil
    import time

    from orchard.demo.make import default_directory, demo_sandbox, make_demo

    started = time.monotonic()
    console = terminal_console()
    mode, unsandboxed = demo_sandbox()
    if unsandboxed:
        console.print(f"note: {unsandboxed}", style="yellow", highlight=False, markup=False)
    ws = make_demo(workspace or default_directory(), workers=workers, executor=ExecutorKind(executor),
                   sandbox_mode=mode)
    console.print(f"demo lab: {ws.root}", markup=False)
    if ws.config.workers.executor in (ExecutorKind.AUTO, ExecutorKind.TMUX) and shutil.which("tmux"):
        from orchard.lab.workers.executors import attach_command

        console.print(f"watch the workers live: {attach_command(ws.tmux_socket)}", markup=False)
    with open_lab(ws.root) as (_, state):
        reason = _run_lab(ws, state)
    console.print(f"stopped: {reason} ({time.monotonic() - started:.0f} s)", markup=False)
    console.print(f"final report: {ws.root / 'FINAL_REPORT.md'}", markup=False)
    console.print((ws.root / "FINAL_REPORT.md").read_text(), markup=False)



@click.command()
@workspace_argument
@click.option("--land", "to_land", metavar="EXPERIMENT", help="Land this held win: the normal landing goes on.")
@click.option("--kill", "to_kill", metavar="EXPERIMENT", help="Kill this held win.")
@click.option("--by", default=None, help="Who decides, as the journal records it (default: the user running this).")
def review(workspace: Path, to_land: str | None, to_kill: str | None, by: str | None) -> None:
    """The wins the hack review held for a person, each flag at its file and line; --land or --kill settles one."""
    import getpass

    from orchard.lab.loop.held import held_wins, settle
    from orchard.lab.records.hack_findings import Settlement
    from orchard.lab.text import visible

    if to_land and to_kill:
        raise UsageError("--land and --kill: choose one (each settles one held win)")
    with open_lab(workspace) as (ws, state):
        if to_land or to_kill:
            settlement = Settlement.LAND if to_land else Settlement.KILL
            said = settle(ws, state, to_land or to_kill or "", settlement, by or getpass.getuser(),
                          say=lambda text: click.echo(text, err=True))
            click.echo(said)
            return
        wins = held_wins(state)
    if not wins:
        click.echo("no win is held for review")
    for win in wins:
        click.echo(f"{win.experiment}  {visible(win.hypothesis)}: {visible(win.title)}")
        for finding in win.findings:
            click.echo(f"  {visible(finding.describe())}")
    if wins:
        click.echo(f"settle each: orchard review {workspace} --land EXPERIMENT | --kill EXPERIMENT")
