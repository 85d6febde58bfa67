"""The command line. Thin: parse, call the library, print, pick the exit code.

Exit codes: 0 success (for `verdict`: not regressed), 1 regressed or failed,
2 usage or configuration error, with one clear message naming the bad input.
Heavy modules are imported inside the commands so `orchard --help` is fast.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from orchard import __version__
from orchard.errors import OrchardError, UsageError
from orchard.lab.config.orchard_toml import ExecutorKind
from orchard.lab.records.hypothesis import Lane

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from types import TracebackType

    from rich.console import Console
    from rich.progress import TaskID

    from orchard.bench.lanes.session import LaneResult
    from orchard.lab.db.state import LabState
    from orchard.lab.records.db import HypothesisRecord
    from orchard.lab.records.hypothesis import Hypothesis
    from orchard.lab.workers.workspace import Workspace


class _Group(click.Group):
    """Turns orchard's errors from anywhere below into one message:
    `UsageError` exits 2, any other `OrchardError` (a failed measurement) exits 1."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except UsageError as error:
            click.echo(f"orchard: error: {error}", err=True)
            ctx.exit(2)
        except OrchardError as error:
            click.echo(f"orchard: {error}", err=True)
            ctx.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="orchard")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars or notes (warnings and results still print).")
def cli(quiet: bool) -> None:
    """orchard: an optimization research lab for a codebase.

    Agent workers try ranked hypotheses in their own checkouts; every
    candidate is rebuilt from clean and judged by a noise-aware verdict with
    absolute quality gates; wins land as described commits, losers are
    journaled. `orchard bench` and `orchard verdict` work alone as a
    benchmark harness.
    """


@cli.group()
def bench() -> None:
    """Measure binaries: suites and the version-control agent lanes."""


def _console(stderr: bool = False) -> Console:
    from rich.console import Console

    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal:
        console.width = 200  # files and pipes get whole lines, not wrapped cells
    return console


def _quiet() -> bool:
    """Whether `orchard --quiet` was given."""
    context = click.get_current_context(silent=True)
    return bool(context and context.find_root().params.get("quiet"))


class _ProgressBar:
    """A rich progress bar on stderr for a measuring campaign."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.quiet = _quiet()
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=_console(stderr=True), transient=True, disable=self.quiet,
        )
        self._task: TaskID | None = None
        self._lock = threading.Lock()  # the lab's judge threads report their campaigns at the same time

    def __enter__(self) -> _ProgressBar:
        self._progress.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._progress.__exit__(kind, error, tb)

    def say(self, text: str) -> None:
        """A timestamped log line above the bar."""
        import time

        if self.quiet:
            return
        self._progress.console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {text}", highlight=False)

    def update(self, done: int, total: int, note: str = "") -> None:
        with self._lock:
            if note and not self.quiet:
                self._progress.console.print(f"[dim]{note}[/]")
            if self._task is None or (done == 0 and note):
                if self._task is not None:
                    self._progress.remove_task(self._task)
                self._task = self._progress.add_task("measuring pairs", total=total)
            self._progress.update(self._task, completed=done, total=total)


suite_option = click.option(
    "--suite", "suite_path", required=True, type=click.Path(path_type=Path), help="Suite TOML file."
)
results_option = click.option(
    "--results", type=click.Path(path_type=Path), default=Path("results"), show_default=True,
    help="Directory for rows (JSONL), summaries and the index.",
)
def export_options(function: Callable[..., None]) -> Callable[..., None]:
    """--export-json/--export-csv/--export-markdown FILE, as hyperfine has them."""
    for name, what in (("markdown", "a Markdown summary (for $GITHUB_STEP_SUMMARY)"),
                       ("csv", "one CSV line per metric"), ("json", "the --json document")):
        function = click.option(f"--export-{name}", f"export_{name}", type=click.Path(path_type=Path, dir_okay=False),
                                default=None, metavar="FILE", help=f"Also write {what} to FILE.")(function)
    return function


confine_option = click.option(
    "--confine/--no-confine", default=True, show_default=True,
    help="Run every measured run in its own bubblewrap sandbox where it works (the suite's `confine` too).")
calibration_option = click.option(
    "--calibration", "calibration_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
    help="Calibration file to use, or to write when absent (committed, or restored from a CI cache); "
         "checked against this machine. Default: the suite's `calibration`, else the per-machine cache.",
)
seed_option = click.option(
    "--seed", type=int, default=None, help="Seed for the run order (printed; random if omitted)."
)


def lane_subject_options(default: str | None, what: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """--subjects, --subjects-file and --flow, which every VCS lane takes."""
    def decorate(function: Callable[..., None]) -> Callable[..., None]:
        for option in (
            click.option("--flow", "flow_files", multiple=True, type=click.Path(path_type=Path),
                         help="extra flow TOML file (repeatable)"),
            click.option("--subjects-file", type=click.Path(path_type=Path),
                         help="TOML subjects file (default: the one shipped with orchard)"),
            click.option("--subjects", "subjects_spec", default=default, show_default=default is not None, help=what),
        ):
            function = option(function)
        return function
    return decorate


def _lane_exit(result: LaneResult) -> None:
    """Print the lane's summary; exit 1 when any row failed."""
    click.echo(result.summary_path.read_text(), nl=False)
    sys.exit(1 if result.failed else 0)


@cli.command()
@suite_option
@click.option("--baseline", required=True, type=click.Path(path_type=Path), help="Baseline binary (explicit path).")
@click.option("--candidate", required=True, type=click.Path(path_type=Path), help="Candidate binary (explicit path).")
@click.option("--runs", type=int, default=None, help="Most pairs to measure (adaptive: stops early when settled).")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON on stdout.")
@click.option("--recalibrate", is_flag=True, help="Ignore the cached A/A calibration and run a new one.")
@click.option("--fail-on", "fail_on", type=click.Choice(["regressed", "inconclusive", "any"]), default="regressed",
              show_default=True,
              help="Which verdicts exit 1: regressed (and ERROR); inconclusive as well; any verdict but NO-CHANGE.")
@calibration_option
@seed_option
@results_option
@export_options
@confine_option
def verdict(suite_path: Path, baseline: Path, candidate: Path, runs: int | None, as_json: bool,
            recalibrate: bool, fail_on: str, calibration_file: Path | None, seed: int | None, results: Path,
            export_json: Path | None, export_csv: Path | None, export_markdown: Path | None, confine: bool) -> None:
    """Judge a candidate binary against a baseline: PASS, NO-CHANGE, INCONCLUSIVE or REGRESSED.

    Exit 1 for REGRESSED or ERROR (and, with --fail-on, INCONCLUSIVE or any
    verdict but NO-CHANGE), else 0.
    """
    import json as jsonlib

    from orchard.bench.campaign import run_verdict
    from orchard.bench.display import as_decision, print_verdict, verdict_facts
    from orchard.bench.exports import Targets, export
    from orchard.bench.policy import FailOn
    from orchard.bench.suite import load_suite

    suite = load_suite(suite_path)
    suite = dataclasses.replace(suite, confine=confine and suite.confine)
    with _ProgressBar() as bar:
        result = run_verdict(
            suite,
            baseline,
            candidate,
            runs=runs,
            seed=seed,
            results=results,
            recalibrate=recalibrate,
            progress=bar.update,
            calibration_file=calibration_file,
        )
    document = result.to_dict()
    if as_json:
        click.echo(jsonlib.dumps(document, indent=2))
    else:
        print_verdict(_console(), result)
    export(as_decision(result), document, verdict_facts(result, suite.name),
           Targets(json=export_json, csv=export_csv, markdown=export_markdown))
    if FailOn(fail_on).fails(result.verdict):
        sys.exit(1)


@cli.command()
@click.argument("old", type=click.Path(path_type=Path, dir_okay=False))
@click.argument("new", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON (schema orchard.compare/1).")
@click.option("--fail-on", "fail_on", type=click.Choice(["regressed", "inconclusive", "any"]), default="regressed",
              show_default=True, help="Which verdicts exit 1 (as for `verdict`).")
def compare(old: Path, new: Path, as_json: bool, fail_on: str) -> None:
    """Judge two stored result sets (rows JSONL of one subject each) without measuring again.

    Paired where their runs line up, unpaired with a warning otherwise.
    """
    import json as jsonlib

    from orchard.bench.compare import compare as run_compare
    from orchard.bench.display import print_decision
    from orchard.bench.policy import FailOn

    result = run_compare(old, new)
    if as_json:
        click.echo(jsonlib.dumps(result.to_json(), indent=2))
    else:
        console = _console()
        console.print(f"{'paired' if result.paired else 'unpaired'} comparison of {new} against {old}")
        print_decision(console, result.decision, result.warnings)
    if FailOn(fail_on).fails(result.decision.verdict):
        sys.exit(1)


@cli.command()
@suite_option
@click.option("--baseline", required=True, type=click.Path(path_type=Path), help="The binary measured against itself.")
@click.option("--runs", type=int, default=None, help="A/A pairs (default: the suite's calibration_runs).")
@click.option("--json", "as_json", is_flag=True, help="Print the calibration as JSON (the calibration file's format).")
@calibration_option
@seed_option
@results_option
@confine_option
def calibrate(suite_path: Path, baseline: Path, runs: int | None, as_json: bool, calibration_file: Path | None,
              seed: int | None, results: Path, confine: bool) -> None:
    """Measure the baseline against itself (A/A) and cache each metric's noise floor."""
    from orchard.bench.calibration import CalibrationFailed
    from orchard.bench.campaign import calibrate as run_calibration
    from orchard.bench.display import calibration_table
    from orchard.bench.suite import load_suite

    suite = load_suite(suite_path)
    suite = dataclasses.replace(suite, confine=confine and suite.confine)
    try:
        with _ProgressBar() as bar:
            cal = run_calibration(
                suite,
                baseline,
                runs=runs,
                seed=seed,
                results=results,
                progress=bar.update,
                file=calibration_file or suite.calibration,
            )
    except CalibrationFailed as error:
        click.echo(f"orchard: {error}", err=True)
        sys.exit(1)
    if as_json:
        import json

        click.echo(json.dumps(cal.to_json(), indent=2))
        return
    console = _console()
    console.print(
        f"A/A calibration of suite {suite.name}: {cal.runs} pairs, seed {cal.seed}, machine {cal.machine_fingerprint}"
    )
    console.print(calibration_table(cal))


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

    from orchard.bench.display import run_json
    from orchard.bench.subjects import parse_binaries
    from orchard.bench.suite import load_suite
    from orchard.bench.suite_run import run_suite

    suite = load_suite(suite_path)
    subjects = parse_binaries(subject_specs)
    seed = random.SystemRandom().randrange(1, 2**31) if seed is None else seed
    if not _quiet():
        click.echo(f"run order seed: {seed}", err=True)
    with _ProgressBar() as bar:
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
    click.echo(writer.summary_path.read_text())
    click.echo(f"rows: {writer.path}")


@cli.command()
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
    from orchard.lab.workers.workspace_init import init_workspace

    workspace = init_workspace(directory, target, bench, config_file)
    click.echo(f"workspace  {workspace.root}")
    click.echo(f"config     {workspace.config_path}  (edit it, then `orchard run {workspace.root}`)")
    click.echo(f"target     {workspace.config.target.repo} at {workspace.target_base()}")
    bench_source = workspace.config.bench.repo or "built-in bench"
    click.echo(f"bench      {bench_source} at {workspace.bench_base()}")
    for warning in workspace.target_warnings():
        click.echo(f"warning: {warning}", err=True)


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
    from orchard.bench.subjects import lane_subjects

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
    from orchard.bench.subjects import lane_subjects

    subjects, flows = lane_subjects(subjects_spec, subjects_file, flow_files)
    options = lane.ContentionOptions(
        subjects=subjects,
        flows=flows,
        results=results,
        workers=lane.parse_workers(workers),
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
    from orchard.bench.subjects import lane_subjects

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


@cli.command()
@results_option
@click.option("--json", "as_json", is_flag=True, help="the machine-readable document (schema orchard.opportunities/1)")
@click.option("--top", type=int, default=None, help="show only the first N items")
def opportunities(results: Path, as_json: bool, top: int | None) -> None:
    """Rank where a subject trails the best comparator, from the latest lane rows."""
    import json

    from orchard.bench import opportunities as ranked

    if not results.is_dir():
        raise UsageError(f"--results {results}: no such directory")
    document = ranked.rank(results)
    if as_json:
        if top:
            document["items"] = document["items"][:top]
        click.echo(json.dumps(document, indent=2, sort_keys=True))
    else:
        click.echo(ranked.render(document, top), nl=False)


workspace_argument = click.argument("workspace", required=False, default=".", type=click.Path(path_type=Path))


@contextlib.contextmanager
def _open_lab(workspace: Path) -> Iterator[tuple[Workspace, LabState]]:
    """The workspace and its lab.db, closed again however the command ends."""
    from orchard.lab.db.state import LabState
    from orchard.lab.workers.workspace import Workspace

    ws = Workspace.open(workspace)
    state = LabState.open(ws.root)
    try:
        yield ws, state
    finally:
        state.close()


def _print_added(hypotheses: Sequence[Hypothesis]) -> None:
    from orchard.lab.notebook.terminal import visible

    for hypothesis in hypotheses:
        click.echo(f"added {visible(hypothesis.id)} (score {hypothesis.score:.2f}): {visible(hypothesis.title)}")


def _run_lab(ws: Workspace, state: LabState) -> str:
    """Run the loop with its log lines and a progress bar for each verdict; Ctrl-C exits 130."""
    from orchard.lab.loop.lab import Lab

    try:
        with _ProgressBar() as bar:
            return Lab(ws, state, say=bar.say, measure_progress=bar.update).run()
    except KeyboardInterrupt:
        click.echo(f"interrupted: every worker was stopped; `orchard run {ws.root}` resumes from lab.db", err=True)
        sys.exit(130)


@cli.command()
@workspace_argument
def run(workspace: Path) -> None:
    """Run the research loop until a stop condition holds; on an existing lab, resume it."""
    with _open_lab(workspace) as (ws, state):
        reason = _run_lab(ws, state)
    click.echo(f"stopped: {reason}")
    click.echo(f"report:  {ws.root / 'FINAL_REPORT.md'}")


@cli.command()
@workspace_argument
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.option("--watch", is_flag=True, help="Redraw the status in place every 2 s until Ctrl-C.")
def status(workspace: Path, as_json: bool, watch: bool) -> None:
    """Workers, backlog, leaderboard and lock state at a glance (or live, with --watch)."""
    import json as jsonlib

    from orchard.lab.db.state import LabState
    from orchard.lab.notebook import status as lab_status
    from orchard.lab.notebook import view
    from orchard.lab.workers.workspace import Workspace

    if as_json and watch:
        raise UsageError("--json and --watch: choose one (a JSON document, or a live display)")
    ws = Workspace.open(workspace)
    state = LabState.open_readonly(ws.root)  # status only reads, and never waits on the lab's writes
    try:
        if watch:
            lab_status.watch(ws, state, _console())
            return
        snapshot = view.build(ws, state)
    finally:
        state.close()
    if as_json:
        click.echo(jsonlib.dumps(lab_status.status(snapshot), indent=2, default=str))
    else:
        _console().print(lab_status.render(snapshot))


@cli.group("backlog")
def backlog_group() -> None:
    """The ranked hypotheses: list, add, rank."""


def _print_ranked(records: list[HypothesisRecord]) -> None:
    """Hypotheses, best first: rank, id, score, status, lane, title (control characters shown escaped)."""
    from orchard.lab.notebook.terminal import visible

    for rank, r in enumerate(records, 1):
        h = r.hypothesis
        click.echo(f"{rank:>3}. {visible(r.id):<32} {h.score:6.2f}  {r.status:<8} {h.lane:<8} {visible(h.title)}")


@backlog_group.command("list")
@workspace_argument
@click.option("--json", "as_json", is_flag=True, help="Print the backlog as JSON.")
@click.option("--all", "show_all", is_flag=True, help="Include attempted hypotheses.")
def backlog_list(workspace: Path, as_json: bool, show_all: bool) -> None:
    """The open hypotheses, best score first."""
    import json as jsonlib

    from orchard.lab.db.ranking import ranked
    from orchard.lab.records.hypothesis import HypothesisStatus

    statuses = tuple(HypothesisStatus) if show_all else (HypothesisStatus.OPEN,)
    with _open_lab(workspace) as (_, state):
        records = ranked(state, statuses)
    if as_json:
        click.echo(
            jsonlib.dumps(
                [
                    {"id": r.id, "status": r.status, "score": r.hypothesis.score, **r.hypothesis.to_dict()}
                    for r in records
                ],
                indent=2,
            )
        )
        return
    if not records:
        attempted = "" if show_all else " of open hypotheses (--all shows the attempted ones too)"
        click.echo(f"the backlog is empty{attempted}: add some with `orchard backlog add {workspace} --file FILE`")
        return
    _print_ranked(records)


@backlog_group.command("add")
@workspace_argument
@click.option("--file", "file_path", type=click.Path(path_type=Path), help="A TOML file of [[hypothesis]] tables.")
@click.option(
    "--from-opportunities",
    "from_opportunities",
    type=click.IntRange(0, 1000),
    default=0,
    metavar="N",
    help="Add the N largest gaps from the latest rows (cause left for a planner; at most 1000).",
)
@click.option("--id", "hypothesis_id", default="", help="Id (default: made from the title).")
@click.option("--title", default="")
@click.option("--metric", default="", help="<scenario>/<metric> of the lab's suite.")
@click.option("--current-value", default="")
@click.option("--cause", "suspected_cause", default="", help="Where in the code the cost comes from.")
@click.option("--change", default="", help="The change to try.")
@click.option("--predicted", "predicted_effect", type=float, default=None,
              help="Relative effect, e.g. -0.3 (at least -1).")
@click.option("--scope", multiple=True, help="A file or glob the worker may touch (repeatable).")
@click.option("--impact", type=float, default=3.0, show_default=True, help="1 to 5.")
@click.option("--confidence", type=float, default=0.5, show_default=True, help="Above 0, at most 1.")
@click.option("--effort", type=float, default=2.0, show_default=True, help="1 to 5.")
@click.option("--lane", type=click.Choice([lane.value for lane in Lane]), default=Lane.EXPLOIT.value, show_default=True)
@click.option("--patch", type=click.Path(path_type=Path), default=None, help="A ready patch for the patch launcher.")
def backlog_add(
    workspace: Path,
    file_path: Path | None,
    from_opportunities: int,
    hypothesis_id: str,
    title: str,
    metric: str,
    current_value: str,
    suspected_cause: str,
    change: str,
    predicted_effect: float | None,
    scope: tuple[str, ...],
    impact: float,
    confidence: float,
    effort: float,
    lane: str,
    patch: Path | None,
) -> None:
    """Add hypotheses: from a TOML file, from the opportunities ranking, or from flags."""
    from orchard.lab.loop import backlog_add
    from orchard.lab.records.hypothesis import Hypothesis

    with _open_lab(workspace) as (ws, state):
        if file_path is not None:
            hypotheses = backlog_add.add_file(ws, state, file_path)
        elif from_opportunities:
            hypotheses = backlog_add.add_opportunities(ws, state, from_opportunities)
        else:
            hypothesis = Hypothesis.from_fields(
                source="flags", id=hypothesis_id, title=title, metric=metric, current_value=current_value,
                suspected_cause=suspected_cause, change=change, scope=list(scope), impact=impact,
                confidence=confidence, effort=effort, lane=lane, predicted_effect=predicted_effect,
                patch=None if patch is None else str(patch.resolve()))
            hypotheses = backlog_add.add_one(ws, state, hypothesis)
    _print_added(hypotheses)


@backlog_group.command("rank")
@workspace_argument
def backlog_rank(workspace: Path) -> None:
    """Rank the open hypotheses again and rewrite backlog.md."""
    from orchard.lab.db.ranking import ranked
    from orchard.lab.notebook import backlog_file
    from orchard.lab.notebook.files import write_atomic

    with _open_lab(workspace) as (ws, state):
        write_atomic(ws.root / "backlog.md", backlog_file.render(state))
        records = ranked(state)
    _print_ranked(records)
    click.echo(f"wrote {ws.root / 'backlog.md'}")


@cli.command()
@workspace_argument
def plan(workspace: Path) -> None:
    """Ask the configured agent for 3-6 new hypotheses; each is validated before it is added."""
    from orchard.lab.loop.planner import plan as run_plan

    with _open_lab(workspace) as (ws, state):
        hypotheses = run_plan(ws, state, say=lambda text: click.echo(text, err=True))
    _print_added(hypotheses)


@cli.command()
@workspace_argument
def report(workspace: Path) -> None:
    """Write FINAL_REPORT.md and report.html from lab.db (also for a lab still running)."""
    from orchard.lab.notebook import files as records

    with _open_lab(workspace) as (ws, state):
        records.write_notebook(ws, state, final=True)
    click.echo((ws.root / "FINAL_REPORT.md").read_text())


@cli.command()
@workspace_argument
@click.option("--push", "push_branches", is_flag=True, help="Publish the review branches to the target repository.")
def finalize(workspace: Path, push_branches: bool) -> None:
    """The landed wins as review branches on the lab's starting main, each judged alone; REVIEW.md."""
    from orchard.lab.finalize.finalize import finalize as run_finalize

    done = run_finalize(workspace, push_branches=push_branches, say=lambda text: click.echo(text, err=True))
    click.echo("\n".join(done.lines()))


@cli.command()
@workspace_argument
@click.option("--port", type=int, default=8765, show_default=True, help="Port to listen on (0: any free one).")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind; any other than 127.0.0.1 requires the token printed at start.",
)
def serve(workspace: Path, port: int, host: str) -> None:
    """A live, read-only web dashboard of the lab (workers, lock, backlog, experiments, journal, charts)."""
    from orchard.lab.notebook.serve import serve as serve_dashboard

    serve_dashboard(workspace, host, port, say=lambda text: click.echo(text, err=True))


@cli.command()
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
    console = _console()
    mode, unsandboxed = demo_sandbox()
    if unsandboxed:
        console.print(f"note: {unsandboxed}", style="yellow", highlight=False)
    ws = make_demo(workspace or default_directory(), workers=workers, executor=ExecutorKind(executor),
                   sandbox_mode=mode)
    console.print(f"demo lab: {ws.root}")
    if ws.config.workers.executor in (ExecutorKind.AUTO, ExecutorKind.TMUX) and shutil.which("tmux"):
        from orchard.lab.workers.executors import attach_command

        console.print(f"watch the workers live: {attach_command(ws.tmux_socket)}")
    with _open_lab(ws.root) as (_, state):
        reason = _run_lab(ws, state)
    console.print(f"stopped: {reason} ({time.monotonic() - started:.0f} s)")
    console.print(f"final report: {ws.root / 'FINAL_REPORT.md'}")
    console.print((ws.root / "FINAL_REPORT.md").read_text())


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM cleans up like Ctrl-C: workers, servers and measured children are stopped."""
    raise KeyboardInterrupt


def main() -> None:
    import signal

    signal.signal(signal.SIGTERM, _terminate)
    cli(prog_name="orchard")


if __name__ == "__main__":
    main()
