"""`orchard bench` (a suite measured for named subjects; the version-control agent lanes) and
`opportunities`, the ranking of the lanes' latest rows."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from orchard.cli.options import lane_subject_options, results_option, seed_option, suite_option
from orchard.cli.output import ProgressBar, is_quiet, terminal_console
from orchard.errors import UsageError

if TYPE_CHECKING:
    from orchard.bench.lanes.session import LaneResult


@click.group()
def bench() -> None:
    """Measure binaries: suites and the version-control agent lanes."""


def _lane_exit(result: LaneResult) -> None:
    """Print the lane's summary; exit 1 when any row failed."""
    click.echo(result.summary_path.read_text(), nl=False)
    sys.exit(1 if result.failed else 0)


@bench.command("run")
@suite_option
@click.option(
    "--subject", "subject_specs", multiple=True, metavar="NAME=BIN", help="A subject to measure (repeatable)."
)
@click.option("--runs", type=int, default=10, show_default=True, help="Runs per subject.")
@click.option("--json", "as_json", is_flag=True, help="Print medians per scenario and subject as JSON.")
@seed_option
@results_option
def bench_run(suite_path: Path, subject_specs: tuple[str, ...], runs: int, as_json: bool, seed: int | None,
              results: Path) -> None:
    """Measure a suite for named subjects, interleaved; rows and a summary, no verdict."""
    import random

    from orchard.bench.campaigns.suite_run import run_suite
    from orchard.bench.results.display import run_json, run_table
    from orchard.bench.suites.subjects import parse_binaries
    from orchard.bench.suites.suite_reader import load_suite

    suite = load_suite(suite_path)
    subjects = parse_binaries(subject_specs)
    seed = random.SystemRandom().randrange(1, 2**31) if seed is None else seed
    if not is_quiet():
        click.echo(f"run order seed: {seed}", err=True)
    with ProgressBar() as bar:
        writer = run_suite(
            suite,
            subjects,
            runs=runs,
            seed=seed,
            results=results,
            progress=lambda done, total: bar.update(done, total),
        )
    if as_json:
        import json

        click.echo(json.dumps(run_json(suite, writer, seed), indent=2))
        return
    console = terminal_console()
    console.print(run_table(suite, writer))
    console.print(f"rows: {writer.path}", markup=False, soft_wrap=True)


@bench.command("task-loop")
@lane_subject_options(None, "git,oak=/path/to/oak,NAME=BIN,NAME:KIND=BIN (default: every subject in the subjects file)")
@click.option("--runs", type=int, default=3, show_default=True)
@click.option("--git-remote", type=click.Choice(["local", "daemon", "github"]), default="local", show_default=True)
@click.option("--scenarios", default="task_loop", show_default=True, help="comma-separated scenario names")
@results_option
@click.option("--keep-workdirs", is_flag=True, help="keep the run's workspaces for inspection")
@click.option("--step-timeout", type=float, default=120.0, show_default=True, help="seconds before a step is killed")
def task_loop(
    subjects_spec: str | None,
    subjects_file: Path | None,
    flow_files: tuple[Path, ...],
    runs: int,
    git_remote: str,
    scenarios: str,
    results: Path,
    keep_workdirs: bool,
    step_timeout: float,
) -> None:
    """Agent task loop for version-control CLIs (task_loop, agent_task, interrupted publication)."""
    from orchard.bench.lanes import task_lane
    from orchard.bench.suites.subjects import lane_subjects

    subjects, flows = lane_subjects(subjects_spec, subjects_file, flow_files)
    options = task_lane.TaskLoopOptions(
        subjects=subjects,
        flows=flows,
        results=results,
        runs=runs,
        git_remote=git_remote,
        scenarios=task_lane.parse_scenarios(scenarios),
        keep_workdirs=keep_workdirs,
        step_timeout_s=step_timeout,
    )
    _lane_exit(task_lane.run_lane(options))


@bench.command()
@lane_subject_options("git", "git, NAME=BIN or NAME:KIND=BIN (commands from the kind's flow)")
@click.option("--workers", default="2,8,32", show_default=True, help="comma-separated worker counts")
@click.option("--commits", type=int, default=5, show_default=True, help="commits per worker")
@click.option("--modes", default="shared_checkout,clone_per_worker", show_default=True)
@click.option("--runs", type=int, default=1, show_default=True)
@results_option
@click.option("--keep-workdirs", is_flag=True)
def contention(
    subjects_spec: str,
    subjects_file: Path | None,
    flow_files: tuple[Path, ...],
    workers: str,
    commits: int,
    modes: str,
    runs: int,
    results: Path,
    keep_workdirs: bool,
) -> None:
    """N concurrent workers x K commits: throughput, retries, integrity."""
    from orchard.bench.lanes import contention as lane
    from orchard.bench.lanes.contention_options import ContentionOptions, parse_workers
    from orchard.bench.suites.subjects import lane_subjects

    subjects, flows = lane_subjects(subjects_spec, subjects_file, flow_files)
    options = ContentionOptions(
        subjects=subjects,
        flows=flows,
        results=results,
        workers=parse_workers(workers),
        commits=commits,
        modes=[mode.strip() for mode in modes.split(",") if mode.strip()],
        runs=runs,
        keep_workdirs=keep_workdirs,
    )
    _lane_exit(lane.run_lane(options))


@bench.command()
@lane_subject_options("git", "git, NAME=BIN or NAME:KIND=BIN (commands from the kind's flow)")
@click.option(
    "--files",
    default="1000,10000,50000",
    show_default=True,
    help="comma-separated file counts of the generated repositories",
)
@click.option(
    "--binaries/--no-binaries", default=True, show_default=True, help="also a repository with large binary files"
)
@click.option(
    "--runs",
    type=int,
    default=5,
    show_default=True,
    help="measured runs per subject and repository (after one warm-up)",
)
@click.option(
    "--cache",
    type=click.Path(path_type=Path),
    default=None,
    help="where generated repositories are cached (default: ~/.cache/orchard/core-fixtures)",
)
@results_option
@click.option("--keep-workdirs", is_flag=True)
def core(
    subjects_spec: str,
    subjects_file: Path | None,
    flow_files: tuple[Path, ...],
    files: str,
    binaries: bool,
    runs: int,
    cache: Path | None,
    results: Path,
    keep_workdirs: bool,
) -> None:
    """status, diff, log, show after an agent edit on 1k-50k file repositories, with absolute gates."""
    from orchard.bench.lanes import core as lane
    from orchard.bench.suites.subjects import lane_subjects

    subjects, flows = lane_subjects(subjects_spec, subjects_file, flow_files)
    options = lane.CoreOptions(
        subjects=subjects,
        flows=flows,
        results=results,
        files=lane.parse_files(files),
        binaries=binaries,
        runs=runs,
        cache=cache or lane.default_cache(),
        keep_workdirs=keep_workdirs,
    )
    _lane_exit(lane.run_lane(options))


@click.command()
@results_option
@click.option("--json", "as_json", is_flag=True, help="the machine-readable document (schema orchard.opportunities/1)")
@click.option("--top", type=int, default=None, help="show only the first N items")
def opportunities(results: Path, as_json: bool, top: int | None) -> None:
    """Rank where a subject trails the best comparator, from the latest lane rows."""
    import json

    from orchard.bench.results import opportunities as ranked

    if not results.is_dir():
        raise UsageError(f"--results {results}: no such directory")
    ranking = ranked.rank(results)
    if as_json:
        click.echo(json.dumps(ranking.to_json(top), indent=2, sort_keys=True))
    else:
        click.echo(ranked.render(ranking, top), nl=False)



@click.command()
@click.option("--results", type=click.Path(path_type=Path), default=None, help="rows of `bench run` and `verdict`")
@click.option("--lab", "labs", multiple=True, type=click.Path(path_type=Path), help="a lab workspace (its main)")
@click.option("--max-pvalue", type=float, default=None, help="significance of a change point (default 0.001)")
@click.option("--min-magnitude", type=float, default=None, help="smallest relative change shown (default 0.02: 2%)")
@click.option("--chart", "chart_file", type=click.Path(path_type=Path), help="write the charts to this HTML file")
@click.option("--json", "as_json", is_flag=True, help="the machine-readable document (schema orchard.history/1)")
def history(results: Path | None, labs: tuple[Path, ...], max_pvalue: float | None, min_magnitude: float | None,
            chart_file: Path | None, as_json: bool) -> None:
    """Change points over stored results and labs' main, by Apache Otava's E-divisive detection."""
    from orchard.history import changes

    found = changes.history(results, labs, max_pvalue=max_pvalue, min_magnitude=min_magnitude, chart_file=chart_file)
    if as_json:
        click.echo(changes.to_json(found))
    else:
        terminal_console().print(changes.table(found))
