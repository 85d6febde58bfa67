"""Running one scenario once against one binary, and what it observed.

Three kinds of scenario: `command` (orchard runs the command and measures the process), `rows` (the command is
a harness that prints JSON rows; metric values are read from the selected rows), and `python` (a callable
returns rows, for lanes that need code). All three yield an `Observation`: metric values, the output the gates
look at, and the row that is recorded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import shlex
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, BinaryIO, cast

from orchard import process, scratch
from orchard.bench.measuring import harness_output as harness
from orchard.bench.measuring import instructions, rows, tokens
from orchard.bench.sandbox import measured_view, python_scenario
from orchard.bench.sandbox.confinement import UNCONFINED, RunConfinement
from orchard.bench.sandbox.environment import isolated_env
from orchard.bench.sandbox.own_timing import own_timing
from orchard.bench.sandbox.run_sandbox import Sandboxes
from orchard.bench.suites.suite import BUILTIN_METRICS, Fixture, Scenario, Suite
from orchard.errors import FixtureError, UsageError

ROWS_ADMITTED_CHARS = 64 * 1024 * 1024  # a rows harness's stdout is data, read whole
SPILL_BYTES = 1024 * 1024  # the gates read all of stdout; past this size it is spilled to a file meanwhile
_SCAN_BYTES = 1024 * 1024


@dataclass
class Observation:
    scenario: str
    role: str  # "baseline" or "candidate"
    values: dict[str, float | None]
    output_digest: str | None  # what the determinism gate compares
    recall: float | None
    ok: bool
    failure: str
    row: dict[str, Any] = field(repr=False)


@dataclass
class Workbench:
    """Everything a scenario run needs besides the binary: fixture paths, scratch space."""

    suite: Suite
    root: Path
    fixtures: dict[str, Path]
    confinement: RunConfinement = UNCONFINED
    sandboxes: Sandboxes | None = None  # confined runs' sandboxes, one per side (None: one per run)

    @staticmethod
    def counter() -> instructions.Counter | None:
        """perf or cachegrind, for scenarios that measure instructions (ORCHARD_INSTRUCTION_COUNTER forces one)."""
        return _counter(os.environ.get(instructions.ENV_COUNTER) or None)

    def stand_ins(self, binary: Path) -> tokens.StandIns:
        """What the counted command line shows instead of this run's paths."""
        return tokens.StandIns.of({str(binary): "BIN", str(self.suite.directory): "SUITE_DIR",
                                   str(self.root / "work"): "WORKDIR",
                                   **{str(path): f"FIXTURE_{name}" for name, path in self.fixtures.items()},
                                   str(self.root): "RUN_DIR"})

    def view(self, scenario: Scenario, binary: Path, command: list[str] | str) -> measured_view.View:
        globs = (*scenario.inputs, *self.suite.readable)  # what a confined run of it may read: measured_view.py
        return measured_view.of_run(binary, self.suite.directory, command, scenario.command, self.fixtures, globs)

    def template_values(self, binary: Path) -> dict[str, Any]:
        return {
            "bin": str(binary),
            "suite_dir": str(self.suite.directory),
            "workdir": str(self.root / "work"),
            "fixture": SimpleNamespace(**self.fixtures),
        }


@functools.cache
def _counter(forced: str | None) -> instructions.Counter | None:
    try:
        return instructions.available(forced)
    except ValueError:
        raise UsageError(f"{instructions.ENV_COUNTER}={forced!r}: choose perf or cachegrind") from None


def render(template: list[str] | str, values: Mapping[str, Any], where: str) -> list[str] | str:
    """Fill `{bin}`, `{fixture.NAME}`, `{suite_dir}`, `{workdir}` into a command."""
    try:
        if isinstance(template, str):
            return template.format_map({key: shlex.quote(v) if isinstance(v, str) else v for key, v in values.items()})
        return [part.format_map(values) for part in template]
    except (KeyError, AttributeError, IndexError, ValueError) as error:
        raise UsageError(f"{where}: cannot fill the command template: {error!r}") from None


@contextlib.contextmanager
def workbench(suite: Suite, keep: bool = False, confinement: RunConfinement = UNCONFINED) -> Iterator[Workbench]:
    """Create fixtures in a private temporary directory; remove it afterwards."""
    root = scratch.make()  # its paths are in the command line: nothing says orchard
    sandboxes = Sandboxes()
    try:
        (root / "work").mkdir()
        bench = Workbench(suite, root, {}, confinement, sandboxes)
        for fixture in suite.fixtures:
            bench.fixtures[fixture.name] = _build_fixture(bench, fixture)
        yield bench
    finally:
        sandboxes.close()
        scratch.release(root, remove=not keep)


def _build_fixture(bench: Workbench, fixture: Fixture) -> Path:
    directory = bench.root / "fixtures" / fixture.name
    directory.mkdir(parents=True)
    values = {**bench.template_values(Path("/nonexistent")), "dir": str(directory)}
    values.pop("bin")
    command = render(fixture.command, values, f"fixture '{fixture.name}'")
    capture = process.run(command, cwd=directory, env=isolated_env(), timeout_s=bench.suite.timeout_s)
    if not capture.ok:
        raise FixtureError(
            f"fixture '{fixture.name}' failed "
            f"({'timed out' if capture.timed_out else f'exit {capture.returncode}'}): "
            f"{capture.stderr_text[-500:].strip()}"
        )
    return directory


def recall(expect: tuple[str, ...], output: BinaryIO) -> float | None:
    """Fraction of expected lines (or facts) present anywhere in the whole output.

    The output is read in chunks that overlap by the longest fact, so a fact
    that straddles two chunks is still found.
    """
    if not expect:
        return None
    needles = [item.encode("utf-8") for item in expect]
    overlap = max(len(needle) for needle in needles) - 1
    found: set[int] = set()
    output.seek(0)
    tail = b""
    while chunk := output.read(_SCAN_BYTES):
        window = tail + chunk
        found.update(i for i, needle in enumerate(needles) if i not in found and needle in window)
        tail = window[len(window) - overlap:] if overlap else b""
    return len(found) / len(needles)


@dataclass(frozen=True)
class RunSpec:
    """Who is measured and how the run is recorded: the same for every kind of scenario."""

    role: str  # "baseline", "candidate", or a subject's name
    subject: Mapping[str, Any]
    run: int
    metadata: Mapping[str, Any]
    metric_names: set[str]
    determinism_fields: tuple[str, ...] = ()


def observe(bench: Workbench, scenario: Scenario, binary: Path, spec: RunSpec, *, count: bool = True) -> Observation:
    """Run `scenario` once against `binary` and record what happened.

    With `count=False` the instruction count (if the scenario measures it) is
    left to `count_instructions`, so a caller can take it outside the lock.
    """
    meta = {**spec.metadata, "role": spec.role}
    if scenario.kind == "python":
        return _observe_python(bench, scenario, binary, spec, meta)
    assert scenario.command is not None
    command = render(scenario.command, bench.template_values(binary), f"scenario '{scenario.name}'")
    results_file = _results_file(bench, scenario, binary)
    if results_file is not None:
        results_file.unlink(missing_ok=True)  # never read an earlier run's results
    capture, timed_by, fraction = _run_command(bench, scenario, binary, command, results_file)
    row = rows.step_row(capture, subject=spec.subject, scenario=scenario.name, operation=scenario.name, run=spec.run,
                        metadata=meta, step_kind="measured", expected_returncodes=scenario.returncodes,
                        stand_ins=bench.stand_ins(binary))
    row["monotonic_start_ns"] = capture.started_ns
    row["monotonic_end_ns"] = capture.ended_ns
    row["timed_by"] = timed_by
    ok = row["returncode"] == 0
    failure = "" if ok else _failure_text(capture, bench.confinement)
    metric_values: dict[str, float | None] = {name: harness.as_number(row.get(name)) for name in scenario.metrics()}
    metric_values["wall_ms"] = row["elapsed_ms"]
    digest: str | None = capture.stdout_sha256[:16]
    if scenario.kind == "rows":
        digest, harness_failure = _read_harness(scenario, spec, capture.stdout_text, results_file, ok, row,
                                                metric_values)
        if harness_failure is not None:
            ok, failure = False, harness_failure
    row["information_recall"] = fraction
    row["output_digest"] = digest
    observation = Observation(scenario.name, spec.role, metric_values, digest, fraction, ok, failure, row)
    if count:
        count_instructions(bench, scenario, binary, observation)
    return observation


def _results_file(bench: Workbench, scenario: Scenario, binary: Path) -> Path | None:
    """Where the scenario's harness writes its results (None: it prints them)."""
    if scenario.file is None:
        return None
    rendered = render(scenario.file, bench.template_values(binary), f"scenario '{scenario.name}'")
    assert isinstance(rendered, str)
    return Path(bench.suite.directory, rendered)


def _run_command(bench: Workbench, scenario: Scenario, binary: Path, command: list[str] | str,
                 results_file: Path | None) -> tuple[process.Capture, str, float | None]:
    """The scenario's command run once, as confined as the bench says and timed by its own timer: its capture
    (showing the command the suite runs), how it was timed, and the recall of the expected facts, read from the
    whole output (token estimates only count the admitted part)."""
    admitted = ROWS_ADMITTED_CHARS if scenario.kind == "rows" else bench.suite.admitted_chars
    with tempfile.SpooledTemporaryFile(max_size=SPILL_BYTES, dir=str(bench.root)) as whole, \
            own_timing(bench.root) as timing:
        capture = timing.own(process.run(
            bench.confinement.wrap(command, binary=binary, suite_dir=bench.suite.directory, root=bench.root,
                                   results_file=results_file, loopback=scenario.loopback, timing=timing,
                                   view=bench.view(scenario, binary, command), sandboxes=bench.sandboxes),
            cwd=bench.suite.directory,
            env=bench.confinement.env(isolated_env(scenario.env)),
            timeout_s=scenario.timeout_s,
            admitted_chars=admitted,
            stdout_sink=cast(BinaryIO, whole) if scenario.expect else None,
            pass_fds=timing.fds,
        ))
        fraction = recall(scenario.expect, cast(BinaryIO, whole))
        return dataclasses.replace(capture, command=command), timing.timer.how, fraction


def _read_harness(scenario: Scenario, spec: RunSpec, text: str, results_file: Path | None, ok: bool,
                  row: dict[str, Any], metric_values: dict[str, float | None]) -> tuple[str | None, str | None]:
    """A rows harness's metrics, read from its selected rows into the row and `metric_values`: the digest of its
    determinism fields, and the failure of a candidate whose harness yields nothing (None: no such failure)."""
    failure = None
    try:
        harness_rows = harness.select(harness.read_rows(scenario, text, results_file, ok), scenario.where)
    except UsageError as error:
        if spec.role != "candidate":
            raise  # the baseline's (or a subject's) harness yields nothing: the suite is wrong
        # a candidate that makes the harness yield nothing failed its run; it never ends the campaign
        harness_rows, failure = [], str(error)
        row["returncode"] = 1
    row["harness_rows"] = harness_rows
    # the harness's own fields win; the harness process's builtins remain for the rest
    reported = {name for name in spec.metric_names
                if name not in BUILTIN_METRICS or any(name in r for r in harness_rows)}
    for name in reported:
        metric_values[name] = harness.metric(harness_rows, name, scenario.aggregate)
    row["harness_metrics"] = {name: metric_values[name] for name in sorted(reported)}  # what is judged
    # a harness's own stdout is data, not what an agent reads
    row["stdout_excerpt"] = text[:2000]
    return harness.fields_digest(harness_rows, spec.determinism_fields), failure


def count_instructions(bench: Workbench, scenario: Scenario, binary: Path, observation: Observation) -> None:
    """The separate, untimed counting run of a scenario that measures instructions or estimated cycles.

    It needs no measurement lock (a count does not move with the machine's
    load), and takes 20-100x the run's time under cachegrind: campaigns take
    it after releasing the lock, so other measurements are not held up.
    """
    cycles = instructions.CYCLES in scenario.measure
    if instructions.METRIC not in scenario.measure and not cycles:
        return
    assert scenario.command is not None
    command = render(scenario.command, bench.template_values(binary), f"scenario '{scenario.name}'")
    results_file = _results_file(bench, scenario, binary)

    def confined(argv: list[str], scratch: Path) -> list[str]:  # the counting run is as confined as the timed one
        return bench.confinement.wrap(argv, binary=binary, suite_dir=bench.suite.directory, root=bench.root,
                                      results_file=results_file, loopback=scenario.loopback, scratch=scratch,
                                      view=bench.view(scenario, binary, command))

    counted = instructions.count(command, counter=bench.counter(), cwd=bench.suite.directory,
                                 env=bench.confinement.env(isolated_env(scenario.env)), timeout_s=scenario.timeout_s,
                                 cycles=cycles, confine=confined)
    observation.row.update(counted.row_fields())
    for metric, value in ((instructions.METRIC, counted.instructions), (instructions.CYCLES, counted.estimated_cycles)):
        if metric in scenario.measure:
            observation.values[metric] = None if value is None else float(value)
    if observation.ok and (counted.instructions is None or (cycles and counted.estimated_cycles is None)):
        observation.ok, observation.failure = False, counted.failure
        observation.row["returncode"] = 1


def _failure_text(capture: process.Capture, confinement: RunConfinement) -> str:
    if capture.timed_out:
        return "timed out"
    tail = capture.stderr_text.strip().splitlines()[-1:] or [""]
    hint = confinement.failure_hint(capture.returncode, capture.stderr_text)
    return f"exit {capture.returncode}" + (f": {tail[0][:200]}" if tail[0] else "") + hint


def _observe_python(
    bench: Workbench, scenario: Scenario, binary: Path, spec: RunSpec, meta: Mapping[str, Any]
) -> Observation:
    assert scenario.callable is not None
    try:
        function = python_scenario.load(scenario.callable, bench.suite.directory)
    except UsageError as error:
        raise UsageError(f"scenario '{scenario.name}': {error}") from None
    arguments = {"binary": binary, "workdir": bench.root / "work", "run": spec.run, "fixtures": dict(bench.fixtures)}
    if bench.confinement.confined:  # the binary it runs is untrusted: in its own sandbox, as a command's run
        done = python_scenario.run_confined(bench.confinement, scenario.callable, arguments,
                                            suite_dir=bench.suite.directory, root=bench.root,
                                            loopback=scenario.loopback, timeout_s=scenario.timeout_s,
                                            env=isolated_env(scenario.env))
    else:
        done = python_scenario.call(function, arguments)
    produced, failure, started, ended = done.rows, done.failure, done.started_ns, done.ended_ns
    harness_rows = harness.select([r for r in produced if isinstance(r, dict)], scenario.where)
    failed_rows = [r for r in harness_rows if rows.is_failure(r)]
    if failed_rows and not failure:
        failure = f"{len(failed_rows)} failed row(s), first: {failed_rows[0].get('operation')}"
    metric_values: dict[str, float | None] = {name: harness.metric(harness_rows, name, scenario.aggregate)
                                              for name in spec.metric_names}
    wall_ms = (ended - started) / 1e6
    metric_values["wall_ms"] = wall_ms
    row = {
        "schema": rows.SCHEMA_VERSION,
        **meta,
        "subject": spec.subject["name"],
        "subject_kind": spec.subject.get("kind"),
        "scenario": scenario.name,
        "operation": scenario.name,
        "run": spec.run,
        "step_kind": "measured",
        "elapsed_ms": round(wall_ms, 3),
        "returncode": 1 if failure else 0,
        "timed_out": False,
        "command": scenario.callable,
        "monotonic_start_ns": started,
        "monotonic_end_ns": ended,
        "harness_rows": harness_rows,
        "harness_metrics": {name: metric_values[name] for name in sorted(spec.metric_names) if name != "wall_ms"},
    }
    digest = harness.fields_digest(harness_rows, spec.determinism_fields)
    return Observation(scenario.name, spec.role, metric_values, digest, None, not failure, failure, row)
