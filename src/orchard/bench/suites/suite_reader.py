"""Reading a suite file: the TOML checked table by table into the `Suite` record of `suite.py`. Every problem is a
`UsageError` naming the file and the offending entry, so a typo never turns into a silently empty verdict.
See docs/suites.md for the format."""

from __future__ import annotations

import hashlib
import math
from dataclasses import fields
from pathlib import Path
from typing import Any

from orchard.bench.deciding.verdict import DEFAULT_NO_CHANGE_WITHIN, Direction, MetricSpec
from orchard.bench.suites import placeholders
from orchard.bench.suites.held_files import holds_back, suite_files
from orchard.bench.suites.scenario_reader import SuiteTable, read_scenario
from orchard.bench.suites.suite import (
    BUILTIN_METRICS,
    DEFAULT_PLAUSIBLE,
    GATE_KINDS,
    GATE_VALUES,
    MAX_FLOOR,
    MAX_RUNS,
    MIN_RUNS_FLOOR,
    OPTIONAL_METRICS,
    Fixture,
    Gate,
    Scenario,
    Suite,
    SuiteSettings,
)
from orchard.errors import UsageError
from orchard.tomlfile import Table, parse_toml, read_bytes


def load_suite(path: Path | str) -> Suite:
    """Read and validate a suite file."""
    path = Path(path).resolve()
    raw = read_bytes(path, "suite")
    data = parse_toml(raw, path, "suite")
    top = SuiteTable(path, "top level", data)
    fixture_tables, scenario_tables, metric_tables, gate_tables = (
        top.tables(key) for key in ("fixture", "scenario", "metric", "gate")
    )
    head_table = top.table("suite")
    top.finish()
    head = _head(path, head_table)
    fixtures = tuple(_fixture(path, i, t) for i, t in enumerate(fixture_tables))
    _unique(path, "fixture", [f.name for f in fixtures])
    scenarios = tuple(read_scenario(path, i, t, head.timeout_s) for i, t in enumerate(scenario_tables))
    if not scenarios:
        raise UsageError(f"suite {path}: no [[scenario]] defined")
    _unique(path, "scenario", [s.name for s in scenarios])
    _check_holdout(path, fixtures, scenarios)
    metrics, recorded = _metrics(path, metric_tables, scenarios, head.no_change_within)
    known_values = {m.metric for m in metrics} | set(recorded) | set(BUILTIN_METRICS) | set(GATE_VALUES)
    scenario_names = [s.name for s in scenarios]
    gates = tuple(
        _gate(path, i, t, scenario_names, known_values, scenarios) for i, t in enumerate(gate_tables)
    )
    _check_placeholders(path, fixtures, scenarios, gates)
    return Suite(
        **{setting.name: getattr(head, setting.name) for setting in fields(SuiteSettings)},
        path=path,
        fixtures=fixtures,
        scenarios=scenarios,
        metrics=tuple(metrics),
        recorded_only=tuple(recorded),
        gates=gates,
        # facts read from an expect_file are part of what the suite judges
        digest=hashlib.sha256(raw + "\0".join(e for s in scenarios for e in s.expect).encode()).hexdigest()[:16],
    )


def _head(path: Path, head: Table) -> SuiteSettings:
    calibration = head.get("calibration", str, None)
    runs = head.get("runs", int, 20)
    read = SuiteSettings(
        name=head.get("name", str, path.stem),
        description=head.get("description", str, ""),
        runs=runs,
        extra_runs=head.get("extra_runs", int, runs),
        min_runs=head.get("min_runs", int, 8),
        calibration_runs=head.get("calibration_runs", int, 40),
        timeout_s=float(head.get("timeout_s", (int, float), 120)),
        admitted_chars=head.get("admitted_output_chars", int, 20_000),
        alpha=float(head.get("alpha", (int, float), 0.05)),
        calibration=None if calibration is None else path.parent / calibration,
        holdout=head.strings("holdout"),
        plausible=float(head.get("plausible", (int, float), DEFAULT_PLAUSIBLE)),
        no_change_within=float(head.get("no_change_within", (int, float), DEFAULT_NO_CHANGE_WITHIN)),
        confine=head.get("confine", bool, True),
        readable=head.strings("readable"),
    )
    head.finish()
    if not 0 <= read.no_change_within < 1:  # also refuses nan
        head.fail(f"'no_change_within' is a share of the baseline, from 0 to below 1 (got {read.no_change_within})")
    if not read.plausible > 1:  # also refuses nan
        head.fail(f"'plausible' must be a factor above 1 (got {read.plausible})")
    if any(not p.strip() or p.startswith("/") or ".." in Path(p).parts for p in read.holdout):
        head.fail("'holdout' lists paths relative to the suite's directory, inside it")
    files = suite_files(path.parent) if read.holdout else []
    for glob in read.holdout:
        if not any(holds_back(relative, (glob,)) for relative in files):
            head.fail(f"'holdout' entry {glob!r} names no file under {path.parent} (it would hold nothing back; "
                      "a scenario or fixture is held out with `holdout = true` in its own table)")
    _check_runs(head, read)
    if not 0 < read.alpha < 0.5:
        head.fail("'alpha' must be between 0 and 0.5")
    return read


def _check_runs(head: Table, read: SuiteSettings) -> None:
    """The pair counts: enough for an exact interval, and few enough to be planned at all."""
    if read.min_runs < MIN_RUNS_FLOOR:
        head.fail(f"'min_runs' must be at least {MIN_RUNS_FLOOR}")
    if read.runs < read.min_runs:
        head.fail(f"'runs' ({read.runs}) must be at least 'min_runs' ({read.min_runs})")
    if read.extra_runs < 0:
        head.fail(f"'extra_runs' must be 0 (never past 'runs') or more (got {read.extra_runs})")
    if read.calibration_runs < MIN_RUNS_FLOOR:
        head.fail(f"'calibration_runs' must be at least {MIN_RUNS_FLOOR}")
    for key in ("runs", "extra_runs", "calibration_runs"):
        if getattr(read, key) > MAX_RUNS:
            head.fail(f"'{key}' must be at most {MAX_RUNS:,} pairs (got {getattr(read, key)})")


def _metrics(path: Path, tables: list[Any], scenarios: tuple[Scenario, ...],
             within: float) -> tuple[list[MetricSpec], list[str]]:
    """The metrics compared (every scenario's own, lower is better, when no [[metric]] is given) and the names
    only recorded (`compare = false`)."""
    if not tables:
        return [MetricSpec(scenario=s.name, metric=m, direction=Direction.LOWER, min_floor=floor, target=True,
                           no_change_within=within)
                for s in scenarios for m, floor in s.metrics().items()], []
    metrics: list[MetricSpec] = []
    recorded: list[str] = []
    for index, table in enumerate(tables):
        reader = SuiteTable(path, f"[[metric]] #{index + 1}", table)
        metric = reader.get("name", str, required=True)
        reader.where = f"[[metric]] '{metric}'"
        said = reader.get("direction", str, Direction.LOWER)
        if said not in tuple(Direction):
            reader.fail("'direction' must be \"lower\" or \"higher\"")
        floor = float(reader.get("floor", (int, float), {**BUILTIN_METRICS, **OPTIONAL_METRICS}.get(metric, 0.0)))
        if not 0 <= floor < math.inf:  # also refuses nan, which compares false with everything
            reader.fail(f"'floor' must be a finite number, not negative (got {floor})")
        if floor > MAX_FLOOR:
            reader.fail(f"'floor' must be at most {MAX_FLOOR:g} ({MAX_FLOOR:.0%} of the baseline; got {floor:g})")
        target = reader.get("target", bool, True)
        compare = reader.get("compare", bool, True)
        applies = reader.strings("scenarios") or tuple(s.name for s in scenarios)
        reader.finish()
        for scenario in applies:
            _check_measured(reader, metric, scenario, scenarios)
        if compare:
            metrics += [MetricSpec(s, metric, Direction(said), floor, target, within) for s in applies]
        else:
            recorded.append(metric)
    return metrics, recorded


def _check_measured(reader: SuiteTable, metric: str, scenario: str, scenarios: tuple[Scenario, ...]) -> None:
    """`scenario` is one of the suite's, and measures `metric` if it is a command scenario."""
    names = [s.name for s in scenarios]
    if scenario not in names:
        reader.fail(f"unknown scenario '{scenario}' (suite has: {', '.join(names)})")
    measured = next(s for s in scenarios if s.name == scenario)
    if measured.kind == "command" and metric not in measured.metrics():
        hint = (f"; add measure = [\"{metric}\"] to the scenario" if metric in OPTIONAL_METRICS else "")
        reader.fail(
            f"unknown metric for command scenario '{scenario}' "
            f"(known: {', '.join(measured.metrics())}{hint})"
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


def _check_placeholders(path: Path, fixtures: tuple[Fixture, ...], scenarios: tuple[Scenario, ...],
                        gates: tuple[Gate, ...]) -> None:
    """Every command's placeholders name something a run fills: a typo stops the suite before anything runs."""
    placeholders.check(path, [f.name for f in fixtures], [
        *((f"[[fixture]] '{f.name}'", f.command, True) for f in fixtures),
        *((f"[[scenario]] '{s.name}'", template, False) for s in scenarios for template in (s.command, s.file)),
        *((f"[[gate]] '{g.name}'", g.command, False) for g in gates),
    ])


def _unique(path: Path, what: str, names: list[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise UsageError(f"suite {path}: duplicate {what} name '{name}'")
        seen.add(name)


def _fixture(path: Path, index: int, table: Any) -> Fixture:
    reader = SuiteTable(path, f"[[fixture]] #{index + 1}", table)
    name = reader.get("name", str, required=True)
    reader.where = f"[[fixture]] '{name}'"
    command = reader.command("command", required=True)
    holdout = reader.get("holdout", bool, False)
    reader.finish()
    assert command is not None
    return Fixture(name, command, holdout)


def _gate(
    path: Path,
    index: int,
    table: Any,
    scenario_names: list[str],
    known_values: set[str],
    scenarios: tuple[Scenario, ...],
) -> Gate:
    reader = SuiteTable(path, f"[[gate]] #{index + 1}", table)
    kind = reader.choice("kind", GATE_KINDS, required=True)
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
