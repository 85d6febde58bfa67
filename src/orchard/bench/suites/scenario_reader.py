"""Reading one `[[scenario]]` table of a suite file (its keys are most of the format: docs/suites.md), and the
strict table every part of a suite is read with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchard.bench.sandbox import measured_view
from orchard.bench.suites import perturbations, placeholders
from orchard.bench.suites.suite import OPTIONAL_METRICS, READER_FORMATS, SCENARIO_KINDS, Scenario
from orchard.tomlfile import Table


class SuiteTable(Table):
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

    def choice(self, key: str, choices: tuple[str, ...], default: Any = ..., *, required: bool = False) -> str:
        """A string that must be one of `choices`."""
        value: str = self.get(key, str, default, required=required)
        if value not in choices:
            self.fail(f"'{key}' must be one of {', '.join(choices)}")
        return value



def read_scenario(path: Path, index: int, table: Any, default_timeout: float) -> Scenario:
    reader = SuiteTable(path, f"[[scenario]] #{index + 1}", table)
    name = reader.get("name", str, required=True)
    reader.where = f"[[scenario]] '{name}'"
    kind = reader.choice("kind", SCENARIO_KINDS, "command")
    command = reader.command("command", required=kind != "python")
    target = reader.get("callable", str, None)
    if kind == "python" and (not target or ":" not in target):
        reader.fail("a python scenario needs 'callable = \"module:function\"'")
    returncodes = reader.get("returncode", (int, list), 0)
    returncodes = tuple(returncodes) if isinstance(returncodes, list) else (returncodes,)
    env = reader.get("env", dict, {})
    if not all(isinstance(v, str) for v in env.values()):
        reader.fail("'env' values must be strings")
    aggregate = reader.choice("aggregate", ("sum", "last", "max", "mean"), "sum")
    measure = _measure(reader, kind)
    result_format = reader.choice("format", READER_FORMATS, "jsonl")
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
        where=reader.get("where", dict, {}),
        aggregate=aggregate,
        measure=measure,
        format=result_format,
        file=results_file,
        holdout=reader.get("holdout", bool, False),
        loopback=reader.get("loopback", bool, False),
        inputs=reader.strings("inputs"),
        variants=_variants(reader),
        variant_command=reader.command("variant_command", required=False),
    )
    if problem := placeholders.unknown(scenario.variant_command, perturbations.PLACEHOLDERS):
        reader.fail(f"'variant_command': {problem}")
    reader.finish()
    if measured_view.names_whole_bench(command):
        reader.fail(measured_view.ASK_FOR_INPUTS)
    return scenario


def _measure(reader: SuiteTable, kind: str) -> tuple[str, ...]:
    """The optional metrics a command scenario measures (a harness reports its own)."""
    measure = reader.strings("measure")
    if unknown := [name for name in measure if name not in OPTIONAL_METRICS]:
        reader.fail(f"'measure' knows {', '.join(OPTIONAL_METRICS)}, not {', '.join(unknown)}")
    if measure and kind != "command":
        reader.fail("'measure' applies to command scenarios (a harness reports its own metrics)")
    return measure


def _variants(reader: SuiteTable) -> tuple[str, ...] | None:
    """The scenario's `variants`: perturbation names (absent: the defaults for its inputs; []: none)."""
    names = reader.get("variants", list, None)
    if names is not None and (problem := perturbations.unknown(names)):
        reader.fail(f"'variants': {problem}")
    return None if names is None else tuple(names)


def _expect_file(path: Path, reader: SuiteTable) -> tuple[str, ...]:
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
