"""The options several commands share, declared once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from orchard.errors import UsageError

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
MAX_SEED = 2**63 - 1


def _seed(context: click.Context, parameter: click.Parameter, value: int | None) -> int | None:
    """A seed from 0 up: Python's random takes -1 as 1, so a negative seed would repeat another's order."""
    if value is not None and not 0 <= value <= MAX_SEED:
        raise UsageError(f"--seed must be from 0 to {MAX_SEED} (got {value})")
    return value


seed_option = click.option(
    "--seed", type=int, default=None, callback=_seed, help="Seed for the run order (printed; random if omitted)."
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


workspace_argument = click.argument("workspace", required=False, default=".", type=click.Path(path_type=Path))


def budget_options(function: Callable[..., None]) -> Callable[..., None]:
    """--max-cost-usd and --max-wall-minutes: `[stop]` keys of orchard.toml, written there (`resume` and `run`)."""
    for option in (
        click.option("--max-wall-minutes", type=float, help="The wall-time budget in minutes (0: no limit)."),
        click.option("--max-cost-usd", type=float, help="The agents' cost budget in USD (0: no limit)."),
    ):
        function = option(function)
    return function
