"""An experiment: one hypothesis given to one worker, with its paths and commands.

Paths are computed here, when the worker starts, from the workspace root:
a prompt or launch line never holds a path that was guessed or carried over.
Commands from orchard.toml get their placeholders replaced by those paths,
shell-quoted.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.records.worker import WorkerCheckout, check_name


class ExperimentStatus(StrEnum):
    """An experiment's progress through the loop, in order."""

    STARTING = "starting"  # recorded, worker not yet launched
    RUNNING = "running"  # the worker is at work
    COLLECTED = "collected"  # the worker ended; its candidate is in lab.db
    JUDGING = "judging"
    HELD = "held"  # judged LAND, but the hack review doubted it: waiting for a person (`orchard review`)
    LANDING = "landing"  # judged LAND; the landing steps are under way
    DONE = "done"

    @classmethod
    def active(cls) -> tuple[ExperimentStatus, ...]:
        """Every status before DONE: the experiment still occupies a worker or the judge."""
        return (cls.STARTING, cls.RUNNING, cls.COLLECTED, cls.JUDGING, cls.LANDING)


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
        """Values for the placeholders of orchard.toml commands."""
        return placeholder_values(workspace=self.workspace, experiment=self.experiment, target_dir=self.target_dir,
                                  bench_dir=self.bench_dir, binary=self.binary, baseline=self.baseline,
                                  suite=self.suite, report=self.report, prompt_file=self.prompt_file)


def placeholder_values(*, workspace: Path, experiment: str, target_dir: Path, bench_dir: Path,
                       binary: Path | None = None, baseline: Path | None = None, suite: Path | None = None,
                       report: Path | None = None, prompt_file: Path | None = None) -> dict[str, str]:
    """The one mapping of `config_values.PLACEHOLDERS` to values (a path not known here is empty)."""
    return {
        "target_dir": str(target_dir),
        "bench_dir": str(bench_dir),
        "binary": str(binary or ""),
        "baseline": str(baseline or ""),
        "suite": str(suite or ""),
        "report": str(report or ""),
        "prompt_file": str(prompt_file or ""),
        "experiment": experiment,
        "workspace": str(workspace),
    }


@dataclass(frozen=True)
class Commands:
    """The experiment's commands with every placeholder filled in ("" when not configured)."""

    build: str
    test: str
    measure: str


def render_command(template: str, placeholders: dict[str, str]) -> str:
    """Fill a command template's placeholders with shell-quoted values."""
    return template.format(**{key: shlex.quote(value) for key, value in placeholders.items()})
