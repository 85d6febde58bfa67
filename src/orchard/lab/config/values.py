"""The check of one orchard.toml table against its section's key schema.

Each key's type, choices, range and placeholders come from the dataclass
field's metadata (`config._key`); every problem is collected, not just the
first, so one run names all that is wrong with the file.
"""

from __future__ import annotations

import dataclasses
import math
import re
import string
import typing
from collections.abc import Mapping
from typing import Any

# Placeholders a command in orchard.toml may use; each is replaced, shell
# quoted, by an absolute path (or name) computed when the worker starts.
PLACEHOLDERS = {
    "target_dir": "the worker's target checkout",
    "bench_dir": "the worker's bench checkout",
    "binary": "the binary built in the worker's target checkout",
    "baseline": "the baseline binary the judge builds from the worker's base commit",
    "suite": "the suite file inside the worker's bench checkout",
    "report": "the worker's report file",
    "prompt_file": "the worker's prompt file",
    "experiment": "the experiment's name",
    "workspace": "the workspace directory",
}

VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\*?$")



def _type_name(kind: Any) -> str:
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false"}.get(
        kind, "a list of strings"
    )


def _check_command(name: str, value: str) -> str | None:
    try:
        fields = [part[1] for part in string.Formatter().parse(value) if part[1] is not None]
    except ValueError as error:
        return f"{name}: {error} in {value!r} (write {{{{ and }}}} for literal braces)"
    unknown = sorted({f for f in fields if f not in PLACEHOLDERS})
    if unknown:
        known = ", ".join("{" + p + "}" for p in PLACEHOLDERS)
        return f"{name}: unknown placeholder {', '.join('{' + u + '}' for u in unknown)}; known: {known}"
    return None


def range_note(meta: Mapping[str, Any]) -> str:
    """The allowed range as a message shows it: ` (1 to 64)`, ` (at least 0)`."""
    low, high = meta["minimum"], meta["maximum"]
    if low is not None and high is not None:
        return f" ({low:g} to {high:g})"
    return f" (at least {low:g})" if low is not None else ""


def _check_value(name: str, spec: dataclasses.Field[Any], kind: Any, value: Any) -> str | None:
    meta = spec.metadata
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if typing.get_origin(kind) is list:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            return f"{name}: expected a list of strings, got {value!r}"
    elif not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        return f"{name}: expected {_type_name(kind)}, got {value!r}"
    if meta["choices"] and value not in meta["choices"]:
        return f"{name}: {value!r} is not one of {', '.join(meta['choices'])}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{name}: {value!r} is not a finite number{range_note(meta)}"
    low, high = meta["minimum"], meta["maximum"]
    if low is not None and value < low:
        return f"{name}: {value!r} is below the minimum {low:g}{range_note(meta)}"
    if high is not None and value > high:
        return f"{name}: {value!r} is above the maximum {high:g}{range_note(meta)}"
    if meta["command"]:
        return _check_command(name, value)
    if meta["variables"]:
        bad = [item for item in value if not VARIABLE.match(item)]
        if bad:
            return f"{name}: {', '.join(map(repr, bad))} is not a variable name (letters, digits, _; may end in *)"
    return None


def check_section(section_name: str, cls: type, raw: Any, problems: list[str]) -> dict[str, Any]:
    """The checked values of one table; each problem is added to `problems`."""
    if not isinstance(raw, dict):
        problems.append(f"{section_name}: expected a [{section_name}] table, got {raw!r}")
        raw = {}
    hints = typing.get_type_hints(cls)
    specs = {spec.name: spec for spec in dataclasses.fields(cls)}
    for key in raw:
        if key not in specs:
            problems.append(f"{section_name}.{key}: unknown key; known: {', '.join(specs)}")
    values: dict[str, Any] = {}
    for key, spec in specs.items():
        name = f"{section_name}.{key}"
        if key not in raw:
            if spec.metadata["required"]:
                problems.append(f"{name}: missing ({spec.metadata['help']})")
            continue
        problem = _check_value(name, spec, hints[key], raw[key])
        if problem is None and spec.metadata["required"] and raw[key] == "":
            problem = f"{name}: must not be empty ({spec.metadata['help']})"
        if problem:
            problems.append(problem)
        else:
            values[key] = float(raw[key]) if hints[key] is float else raw[key]
    return values
