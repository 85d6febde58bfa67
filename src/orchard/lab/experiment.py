"""An experiment: one hypothesis given to one worker, with its paths and commands.

Paths are computed here, when the worker starts, from the workspace root:
a prompt or launch line never holds a path that was guessed or carried over.
Commands from orchard.toml get their placeholders replaced by those paths,
shell-quoted.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from orchard.lab.hypothesis import Hypothesis
from orchard.lab.workspace import WorkerCheckout, Workspace, check_name


@dataclass(frozen=True)
class Experiment:
    name: str
    hypothesis: Hypothesis
    checkout: WorkerCheckout

    def __post_init__(self) -> None:
        check_name("experiment", self.name)


@dataclass(frozen=True)
class ExperimentPaths:
    """Every absolute path a worker needs, computed now."""

    workspace: Path
    experiment: str
    target_dir: Path
    bench_dir: Path
    binary: Path | None
    baseline: Path | None
    suite: Path | None
    report: Path
    prompt_file: Path
    log_file: Path

    def placeholders(self) -> dict[str, str]:
        """Values for the placeholders of orchard.toml commands (unset paths are empty)."""
        return {
            "target_dir": str(self.target_dir),
            "bench_dir": str(self.bench_dir),
            "binary": str(self.binary or ""),
            "baseline": str(self.baseline or ""),
            "suite": str(self.suite or ""),
            "report": str(self.report),
            "prompt_file": str(self.prompt_file),
            "experiment": self.experiment,
            "workspace": str(self.workspace),
        }


@dataclass(frozen=True)
class Commands:
    """The experiment's commands with every placeholder filled in ("" when not configured)."""

    build: str
    test: str
    measure: str
    bench_test: str


def render_command(template: str, placeholders: dict[str, str]) -> str:
    """Fill a command template's placeholders with shell-quoted values."""
    return template.format(**{key: shlex.quote(value) for key, value in placeholders.items()})


def experiment_paths(workspace: Workspace, experiment: Experiment) -> ExperimentPaths:
    worker = experiment.checkout.worker
    return ExperimentPaths(
        workspace=workspace.root,
        experiment=experiment.name,
        target_dir=worker.target_dir,
        bench_dir=worker.bench_dir,
        binary=workspace.binary(worker),
        baseline=workspace.baseline_binary(experiment.checkout.target_base),
        suite=workspace.suite(worker.bench_dir),
        report=worker.report_path,
        prompt_file=workspace.prompt_path(experiment.name),
        log_file=workspace.log_path(experiment.name),
    )


def experiment_commands(workspace: Workspace, paths: ExperimentPaths) -> Commands:
    values = paths.placeholders()
    target, bench = workspace.config.target, workspace.config.bench
    return Commands(
        build=render_command(target.build, values),
        test=render_command(target.test, values),
        measure=render_command(bench.measure, values),
        bench_test=render_command(bench.test, values),
    )
