"""An experiment's paths and commands, computed from the workspace when its worker starts.

A prompt or launch line never holds a path that was guessed or carried
over: each is computed here from the workspace root (`records/experiment.py`
holds the records and the placeholder mapping).
"""

from __future__ import annotations

from orchard.lab.records.experiment import Commands, Experiment, ExperimentPaths, render_command
from orchard.lab.workers.workspace.workspace import Workspace


def experiment_paths(workspace: Workspace, experiment: Experiment) -> ExperimentPaths:
    worker = experiment.checkout.worker
    return ExperimentPaths(
        workspace=workspace.root,
        experiment=experiment.name,
        target_dir=worker.target_dir,
        bench_dir=worker.bench_dir,
        binary=workspace.binary(worker),
        baseline=workspace.worker_baseline(worker),
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
    )
