"""Suite files: what to run, what to measure, what must hold.

A suite is a TOML file of fixtures (untimed set-up), scenarios (what is
measured), metrics (with direction and minimum floor) and gates (absolute
quality checks). Every problem is reported as a `UsageError` naming the file
and the offending entry, so a typo never turns into a silently empty verdict.
See docs/suites.md for the format.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchard.bench.readers import Format
from orchard.bench.verdict import MetricSpec
from orchard.errors import UsageError
from orchard.tomlfile import Table, parse_toml, read_bytes

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


@dataclass(frozen=True)
class Suite:
    path: Path
    name: str
    description: str
    fixtures: tuple[Fixture, ...]
    scenarios: tuple[Scenario, ...]
    metrics: tuple[MetricSpec, ...]
    recorded_only: tuple[str, ...]  # metrics gates may read but the verdict does not judge
    gates: tuple[Gate, ...]
    runs: int
    min_runs: int
    calibration_runs: int
    timeout_s: float
    admitted_chars: int
    alpha: float
    digest: str = field(repr=False)
    calibration: Path | None = None  # a calibration file to use and keep (committed or CI-cached)
    holdout: tuple[str, ...] = ()  # files (globs, relative to the suite's directory) workers never see
    plausible: float = DEFAULT_PLAUSIBLE  # a target metric improved more than this many times is suspect

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


class _SuiteReader(Table):
    """A suite's table: the strict `Table`, plus the command values only suites have."""

    def __init__(self, path: Path, where: str, table: Any) -> None:
        super().__init__(f"suite {path}", where, table)

    def command(self, key: str, *, required: bool) -> list[str] | str | None:
        value: list[str] | str | None = self.get(key, (list, str), None, required=required)
        if isinstance(value, list):
            if not value or not all(isinstance(part, str) for part in value):
                self.fail(f"'{key}' must be a non-empty list of strings or a shell string")
        elif isinstance(value, str) and not value.strip():
            self.fail(f"'{key}' is empty")
        return value


def load_suite(path: Path | str) -> Suite:
    """Read and validate a suite file."""
    path = Path(path).resolve()
    raw = read_bytes(path, "suite")
    data = parse_toml(raw, path, "suite")
    top = _SuiteReader(path, "top level", data)
    fixture_tables, scenario_tables, metric_tables, gate_tables = (
        top.tables(key) for key in ("fixture", "scenario", "metric", "gate")
    )
    head = top.table("suite")
    top.finish()
    name = head.get("name", str, path.stem)
    description = head.get("description", str, "")
    runs = head.get("runs", int, 20)
    min_runs = head.get("min_runs", int, 8)
    calibration_runs = head.get("calibration_runs", int, 40)
    timeout_s = float(head.get("timeout_s", (int, float), 120))
    admitted_chars = head.get("admitted_output_chars", int, 20_000)
    alpha = float(head.get("alpha", (int, float), 0.05))
    calibration_file = head.get("calibration", str, None)
    holdout_files = head.strings("holdout")
    plausible = float(head.get("plausible", (int, float), DEFAULT_PLAUSIBLE))
    head.finish()
    if not plausible > 1:  # also refuses nan
        head.fail(f"'plausible' must be a factor above 1 (got {plausible})")
    if any(not p.strip() or p.startswith("/") or ".." in Path(p).parts for p in holdout_files):
        head.fail("'holdout' lists paths relative to the suite's directory, inside it")
    if min_runs < MIN_RUNS_FLOOR:
        head.fail(f"'min_runs' must be at least {MIN_RUNS_FLOOR}")
    if runs < min_runs:
        head.fail(f"'runs' ({runs}) must be at least 'min_runs' ({min_runs})")
    if calibration_runs < MIN_RUNS_FLOOR:
        head.fail(f"'calibration_runs' must be at least {MIN_RUNS_FLOOR}")
    if not 0 < alpha < 0.5:
        head.fail("'alpha' must be between 0 and 0.5")

    fixtures = tuple(_fixture(path, i, t) for i, t in enumerate(fixture_tables))
    _unique(path, "fixture", [f.name for f in fixtures])
    scenarios = tuple(_scenario(path, i, t, timeout_s) for i, t in enumerate(scenario_tables))
    if not scenarios:
        raise UsageError(f"suite {path}: no [[scenario]] defined")
    _unique(path, "scenario", [s.name for s in scenarios])
    scenario_names = [s.name for s in scenarios]
    _check_holdout(path, fixtures, scenarios)

    metrics: list[MetricSpec] = []
    recorded: list[str] = []
    if not metric_tables:
        metrics = [
            MetricSpec(scenario=s.name, metric=m, direction="lower", min_floor=floor, target=True)
            for s in scenarios
            for m, floor in s.metrics().items()
        ]
    for index, table in enumerate(metric_tables):
        reader = _SuiteReader(path, f"[[metric]] #{index + 1}", table)
        metric = reader.get("name", str, required=True)
        reader.where = f"[[metric]] '{metric}'"
        direction = reader.get("direction", str, "lower")
        if direction not in ("lower", "higher"):
            reader.fail("'direction' must be \"lower\" or \"higher\"")
        floor = float(reader.get("floor", (int, float), {**BUILTIN_METRICS, **OPTIONAL_METRICS}.get(metric, 0.0)))
        if floor < 0:
            reader.fail("'floor' must not be negative")
        target = reader.get("target", bool, True)
        compare = reader.get("compare", bool, True)
        applies = reader.strings("scenarios") or tuple(scenario_names)
        reader.finish()
        for scenario in applies:
            if scenario not in scenario_names:
                reader.fail(f"unknown scenario '{scenario}' (suite has: {', '.join(scenario_names)})")
            measured = next(s for s in scenarios if s.name == scenario)
            if measured.kind == "command" and metric not in measured.metrics():
                hint = (f"; add measure = [\"{metric}\"] to the scenario" if metric in OPTIONAL_METRICS else "")
                reader.fail(
                    f"unknown metric for command scenario '{scenario}' "
                    f"(known: {', '.join(measured.metrics())}{hint})"
                )
        if compare:
            metrics += [MetricSpec(s, metric, direction, floor, target) for s in applies]
        else:
            recorded.append(metric)

    known_values = {m.metric for m in metrics} | set(recorded) | set(BUILTIN_METRICS) | set(GATE_VALUES)
    gates = tuple(
        _gate(path, i, t, scenario_names, known_values, scenarios) for i, t in enumerate(gate_tables)
    )
    return Suite(
        path=path,
        name=name,
        description=description,
        fixtures=fixtures,
        scenarios=scenarios,
        metrics=tuple(metrics),
        recorded_only=tuple(recorded),
        gates=gates,
        runs=runs,
        min_runs=min_runs,
        calibration_runs=calibration_runs,
        timeout_s=timeout_s,
        admitted_chars=admitted_chars,
        alpha=alpha,
        # facts read from an expect_file are part of what the suite judges
        digest=hashlib.sha256(raw + "\0".join(e for s in scenarios for e in s.expect).encode()).hexdigest()[:16],
        calibration=None if calibration_file is None else path.parent / calibration_file,
        holdout=holdout_files,
        plausible=plausible,
    )


def _check_holdout(path: Path, fixtures: tuple[Fixture, ...], scenarios: tuple[Scenario, ...]) -> None:
    """Workers must still have something to measure, and nothing they see may need a held-out fixture."""
    if all(s.holdout for s in scenarios):
        raise UsageError(f"suite {path}: every scenario is held out: workers would have nothing to measure")
    hidden = [f.name for f in fixtures if f.holdout]
    for scenario in scenarios:
        text = " ".join(scenario.command) if isinstance(scenario.command, list) else scenario.command or ""
        needs = [name for name in hidden if "{fixture." + name + "}" in text]
        if needs and not scenario.holdout:
            raise UsageError(f"suite {path}: [[scenario]] '{scenario.name}' is visible to workers but uses "
                             f"held-out fixture(s) {', '.join(needs)}: mark it holdout = true too")


def _unique(path: Path, what: str, names: list[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise UsageError(f"suite {path}: duplicate {what} name '{name}'")
        seen.add(name)


def _fixture(path: Path, index: int, table: Any) -> Fixture:
    reader = _SuiteReader(path, f"[[fixture]] #{index + 1}", table)
    name = reader.get("name", str, required=True)
    reader.where = f"[[fixture]] '{name}'"
    command = reader.command("command", required=True)
    holdout = reader.get("holdout", bool, False)
    reader.finish()
    assert command is not None
    return Fixture(name, command, holdout)


def _scenario(path: Path, index: int, table: Any, default_timeout: float) -> Scenario:
    reader = _SuiteReader(path, f"[[scenario]] #{index + 1}", table)
    name = reader.get("name", str, required=True)
    reader.where = f"[[scenario]] '{name}'"
    kind = reader.get("kind", str, "command")
    if kind not in SCENARIO_KINDS:
        reader.fail(f"'kind' must be one of {', '.join(SCENARIO_KINDS)}")
    command = reader.command("command", required=kind != "python")
    target = reader.get("callable", str, None)
    if kind == "python" and (not target or ":" not in target):
        reader.fail("a python scenario needs 'callable = \"module:function\"'")
    returncodes = reader.get("returncode", (int, list), 0)
    returncodes = tuple(returncodes) if isinstance(returncodes, list) else (returncodes,)
    env = reader.get("env", dict, {})
    if not all(isinstance(v, str) for v in env.values()):
        reader.fail("'env' values must be strings")
    where = reader.get("where", dict, {})
    aggregate = reader.get("aggregate", str, "sum")
    if aggregate not in ("sum", "last", "max", "mean"):
        reader.fail("'aggregate' must be one of sum, last, max, mean")
    measure = reader.strings("measure")
    unknown = [name for name in measure if name not in OPTIONAL_METRICS]
    if unknown:
        reader.fail(f"'measure' knows {', '.join(OPTIONAL_METRICS)}, not {', '.join(unknown)}")
    if measure and kind != "command":
        reader.fail("'measure' applies to command scenarios (a harness reports its own metrics)")
    result_format = reader.get("format", str, "jsonl")
    if result_format not in READER_FORMATS:
        reader.fail(f"'format' must be one of {', '.join(READER_FORMATS)}")
    results_file = reader.get("file", str, None)
    if (result_format != "jsonl" or results_file is not None) and kind != "rows":
        reader.fail("'format' and 'file' apply to rows scenarios (a harness that writes results)")
    scenario = Scenario(
        name=name,
        kind=kind,
        command=command,
        callable=target,
        expect=reader.strings("expect") + _expect_file(path, reader),
        returncodes=returncodes,
        timeout_s=float(reader.get("timeout_s", (int, float), default_timeout)),
        env=env,
        where=where,
        aggregate=aggregate,
        measure=measure,
        format=result_format,
        file=results_file,
        holdout=reader.get("holdout", bool, False),
    )
    reader.finish()
    return scenario


def _expect_file(path: Path, reader: _SuiteReader) -> tuple[str, ...]:
    """Facts listed one per line in a file beside the suite (hundreds do not belong in TOML)."""
    name = reader.get("expect_file", str, None)
    if name is None:
        return ()
    facts = path.parent / name
    try:
        text = facts.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reader.fail(f"'expect_file' {name!r}: cannot read {facts}: {getattr(error, 'strerror', None) or error}")
    lines = tuple(line.strip() for line in text.splitlines() if line.strip())
    if not lines:
        reader.fail(f"'expect_file' {name!r} lists no facts")
    return lines


def _gate(
    path: Path,
    index: int,
    table: Any,
    scenario_names: list[str],
    known_values: set[str],
    scenarios: tuple[Scenario, ...],
) -> Gate:
    reader = _SuiteReader(path, f"[[gate]] #{index + 1}", table)
    kind = reader.get("kind", str, required=True)
    if kind not in GATE_KINDS:
        reader.fail(f"'kind' must be one of {', '.join(GATE_KINDS)}")
    name = reader.get("name", str, kind)
    reader.where = f"[[gate]] '{name}'"
    applies = reader.strings("scenarios") or tuple(scenario_names)
    for scenario in applies:
        if scenario not in scenario_names:
            reader.fail(f"unknown scenario '{scenario}' (suite has: {', '.join(scenario_names)})")
    metric = reader.get("metric", str, None)
    value = reader.data.get("value")
    reader.skip("value")
    command = reader.command("command", required=kind == "command")
    fields = reader.strings("fields")
    reader.finish()
    if kind in ("no_drop", "hold"):
        if metric is None:
            reader.fail(f"a '{kind}' gate needs 'metric'")
        if metric not in known_values:
            reader.fail(
                f"unknown metric '{metric}' (known: {', '.join(sorted(known_values))}; "
                "declare others with [[metric]], compare = false to record without judging)"
            )
        if kind == "hold" and value is None:
            reader.fail("a 'hold' gate needs 'value'")
    if kind == "information_recall":
        missing = [s.name for s in scenarios if s.name in applies and not s.expect]
        if missing:
            reader.fail(f"scenario(s) {', '.join(missing)} have no 'expect' lines (or 'expect_file') to recall")
    if kind == "determinism":
        loose = [s.name for s in scenarios if s.name in applies and s.kind != "command"]
        if loose and not fields:
            reader.fail(
                f"scenario(s) {', '.join(loose)} produce rows: name the row 'fields' that must be deterministic"
            )
    return Gate(kind, name, applies, metric, value, command, fields)
