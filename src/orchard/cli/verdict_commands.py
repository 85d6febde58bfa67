"""`verdict`, `compare` and `calibrate`: the noise-aware judgement of two binaries or two stored result sets,
and the A/A noise floor it rests on (`calibration-key`: the name a CI cache keeps that floor under)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import click

from orchard.cli.options import (
    calibration_option,
    confine_option,
    export_options,
    results_option,
    seed_option,
    suite_option,
)
from orchard.cli.output import ProgressBar, terminal_console


@click.command()
@suite_option
@click.option("--baseline", required=True, type=click.Path(path_type=Path), help="Baseline binary (explicit path).")
@click.option("--candidate", required=True, type=click.Path(path_type=Path), help="Candidate binary (explicit path).")
@click.option("--runs", type=int, default=None, help="Most pairs to measure (adaptive: stops early when settled).")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON on stdout.")
@click.option("--recalibrate", is_flag=True, help="Ignore the cached A/A calibration and run a new one.")
@click.option("--fail-on", "fail_on", type=click.Choice(["regressed", "inconclusive", "any"]), default="regressed",
              show_default=True,
              help="Which verdicts exit 1: regressed (and ERROR); inconclusive as well; any verdict but NO-CHANGE.")
@click.option("--measure-identical", is_flag=True,
              help="Measure even when both programs are byte-identical (by default: NO-CHANGE at once).")
@calibration_option
@seed_option
@results_option
@export_options
@confine_option
def verdict(suite_path: Path, baseline: Path, candidate: Path, runs: int | None, as_json: bool,
            recalibrate: bool, fail_on: str, measure_identical: bool, calibration_file: Path | None,
            seed: int | None, results: Path, export_json: Path | None, export_csv: Path | None,
            export_markdown: Path | None, confine: bool) -> None:
    """Judge a candidate binary against a baseline: PASS, NO-CHANGE, INCONCLUSIVE or REGRESSED.

    Exit 1 for REGRESSED or ERROR (and, with --fail-on, INCONCLUSIVE or any
    verdict but NO-CHANGE), else 0.
    """
    from orchard.bench.suites.suite_reader import load_suite

    suite = load_suite(suite_path)  # before the measuring modules (numpy, rich): a bad suite is refused at once
    suite = dataclasses.replace(suite, confine=confine and suite.confine)
    import json as jsonlib

    from orchard.bench.campaigns.campaign import run_verdict
    from orchard.bench.deciding.policy import FailOn
    from orchard.bench.exports import Targets, export
    from orchard.bench.results.display import as_decision, print_verdict, verdict_facts

    with ProgressBar() as bar:
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
            skip_identical=not measure_identical,
        )
    document = result.to_dict()
    if as_json:
        click.echo(jsonlib.dumps(document, indent=2))
    else:
        print_verdict(terminal_console(), result)
    export(as_decision(result), document, verdict_facts(result, suite.name),
           Targets(json=export_json, csv=export_csv, markdown=export_markdown))
    if FailOn(fail_on).fails(result.verdict):
        sys.exit(1)


@click.command()
@click.argument("old", type=click.Path(path_type=Path, dir_okay=False))
@click.argument("new", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON (schema orchard.compare/1).")
@click.option("--fail-on", "fail_on", type=click.Choice(["regressed", "inconclusive", "any"]), default="regressed",
              show_default=True, help="Which verdicts exit 1 (as for `verdict`).")
def compare(old: Path, new: Path, as_json: bool, fail_on: str) -> None:
    """Judge two stored result sets without measuring again: orchard rows (JSONL of one subject each), or two
    hyperfine, pyperf, pytest-benchmark or google-benchmark JSON files (detected by content).

    Paired where their runs line up, unpaired with a warning otherwise.
    """
    import json as jsonlib

    from orchard.bench.deciding.policy import FailOn
    from orchard.bench.results.compare import compare as run_compare
    from orchard.bench.results.display import print_decision

    result = run_compare(old, new)
    if as_json:
        click.echo(jsonlib.dumps(result.to_json(), indent=2))
    else:
        console = terminal_console()
        console.print(f"{'paired' if result.paired else 'unpaired'} comparison of {new} against {old}", markup=False)
        print_decision(console, result.decision, result.warnings)
    if FailOn(fail_on).fails(result.decision.verdict):
        sys.exit(1)


@click.command()
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
    from orchard.bench.campaigns.campaign import calibrate as run_calibration
    from orchard.bench.deciding.calibration import CalibrationFailed
    from orchard.bench.results.display import calibration_table
    from orchard.bench.suites.suite_reader import load_suite

    suite = load_suite(suite_path)
    suite = dataclasses.replace(suite, confine=confine and suite.confine)
    try:
        with ProgressBar() as bar:
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
    console = terminal_console()
    console.print(f"A/A calibration of suite {suite.name}: {cal.runs} pairs, seed {cal.seed}, "
                  f"machine {cal.machine_fingerprint}", markup=False)
    console.print(calibration_table(cal))



@click.command("calibration-key")
@suite_option
@confine_option
def calibration_key(suite_path: Path, confine: bool) -> None:
    """Print the key of the calibration this suite gets here (a CI cache key: machine, suite, confinement)."""
    from orchard.bench.deciding.calibration import cache_key
    from orchard.bench.machine import machine_fingerprint
    from orchard.bench.sandbox.confinement import for_campaign
    from orchard.bench.suites.suite_reader import load_suite

    suite = load_suite(suite_path)
    isolation = for_campaign(confine and suite.confine, suite.directory).isolation
    click.echo(cache_key(machine_fingerprint(), suite.digest, isolation))
