"""Suites: what to run, what to measure, what must hold, as records.

A suite is a TOML file of fixtures (untimed set-up), scenarios (what is
measured), metrics (with direction and minimum floor) and gates (absolute
quality checks), under the `[suite]` table's settings. `suite_reader.py`
reads and checks the file into these records; docs/suites.md has the format.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchard.bench.deciding.verdict import DEFAULT_NO_CHANGE_WITHIN, MetricSpec
from orchard.bench.suites.readers import Format

SCENARIO_KINDS = ("command", "rows", "python")
GATE_KINDS = ("exit_status", "information_recall", "determinism", "command", "no_drop", "hold")

# Measured for every command scenario without configuration: name -> default floor.
BUILTIN_METRICS: dict[str, float] = {
    "wall_ms": 0.01,
    "cpu_ms": 0.01,
    "peak_rss_bytes": 0.01,
    "stdout_bytes": 0.0,
    "estimated_total_tokens": 0.0,
    "tool_call_count": 0.0,
}
# Opt-in per command scenario with `measure = [...]`, taken in separate untimed runs.
OPTIONAL_METRICS: dict[str, float] = {
    "instructions": 0.002,  # near-deterministic: A/A calibration sets the real floor, usually far below
    "estimated_cycles": 0.002,  # cachegrind's cache simulation in the same untimed run: as deterministic
}
# Values a gate can read besides metrics.
GATE_VALUES = ("information_recall",)

READER_FORMATS = tuple(str(f) for f in Format)

MIN_RUNS_FLOOR = 6  # below this an exact 90% interval does not exist
MAX_RUNS = 10_000  # pairs a campaign may plan: each look sorts n(n+1)/2 Walsh averages (50 M at this n)
MAX_FLOOR = 10.0  # a noise floor of 1,000% of the baseline already hides every change a lab could make
DEFAULT_PLAUSIBLE = 10.0  # improvement factor (baseline/candidate, or its inverse) a win is believed up to


@dataclass(frozen=True)
class Fixture:
    name: str
    command: list[str] | str
    holdout: bool = False  # run only by the lab's judge, never in a worker's copy of the bench


@dataclass(frozen=True)
class Scenario:
    name: str
    kind: str
    command: list[str] | str | None
    callable: str | None
    expect: tuple[str, ...]
    returncodes: tuple[int, ...]
    timeout_s: float
    env: Mapping[str, str]
    where: Mapping[str, Any]
    aggregate: str
    measure: tuple[str, ...] = ()  # opt-in metrics from separate untimed runs ("instructions", "estimated_cycles")
    format: str = "jsonl"  # rows scenarios: which tool's results the harness writes (see readers.py)
    file: str | None = None  # rows scenarios: the results file the harness writes (default: its stdout)
    holdout: bool = False  # run only by the lab's judge, never in a worker's copy of the bench
    loopback: bool = False  # a confined run keeps the host's network (it talks to a local server)
    inputs: tuple[str, ...] = ()  # globs (relative to the suite's directory) a confined run may read
    variants: tuple[str, ...] | None = None  # perturbations of its inputs the judge also runs (None: the defaults)
    variant_command: list[str] | str | None = None  # writes one more variant: {input} to {output}, with {seed}
    variant_of: str = ""  # a variant made at verdict time: the scenario whose input it perturbs

    def metrics(self) -> dict[str, float]:
        """Every metric this scenario yields without a harness: name -> default floor."""
        return {**BUILTIN_METRICS, **{name: OPTIONAL_METRICS[name] for name in self.measure}}


@dataclass(frozen=True)
class Gate:
    kind: str
    name: str
    scenarios: tuple[str, ...]
    metric: str | None = None
    value: Any = None
    command: list[str] | str | None = None
    fields: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class SuiteSettings:
    """The `[suite]` table, checked: the suite's name and the campaign settings every run of it shares."""

    name: str
    description: str
    runs: int
    min_runs: int
    calibration_runs: int
    extra_runs: int = 0  # pairs past `runs` for a metric still open there (the file's default: as many as `runs`)
    timeout_s: float
    admitted_chars: int
    alpha: float
    no_change_within: float = DEFAULT_NO_CHANGE_WITHIN  # the smallest relative change that matters
    calibration: Path | None = None  # a calibration file to use and keep (committed or CI-cached)
    holdout: tuple[str, ...] = ()  # files (globs, relative to the suite's directory) workers never see
    plausible: float = DEFAULT_PLAUSIBLE  # a target metric improved more than this many times is suspect
    confine: bool = True  # measured runs in bubblewrap where it works (`confine = false` turns it off)
    readable: tuple[str, ...] = ()  # more paths (globs) every confined run may read (measured_view.py)


@dataclass(frozen=True, kw_only=True)
class Suite(SuiteSettings):
    """A suite file, read whole: its settings, fixtures, scenarios, metrics and gates."""

    path: Path
    fixtures: tuple[Fixture, ...]
    scenarios: tuple[Scenario, ...]
    metrics: tuple[MetricSpec, ...]
    recorded_only: tuple[str, ...]  # metrics gates may read but the verdict does not judge
    gates: tuple[Gate, ...]
    digest: str = field(repr=False)

    @property
    def held_out(self) -> frozenset[str]:
        """The names of the held-out scenarios."""
        return frozenset(s.name for s in self.scenarios if s.holdout)

    @property
    def directory(self) -> Path:
        return self.path.parent

    def scenario(self, name: str) -> Scenario:
        for scenario in self.scenarios:
            if scenario.name == name:
                return scenario
        raise KeyError(name)


