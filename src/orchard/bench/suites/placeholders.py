"""The placeholders a suite's commands may use, checked when the suite loads.

Scenario and gate commands and a rows scenario's `file` may use `{bin}`,
`{suite_dir}`, `{workdir}` and `{fixture.NAME}` for a fixture of the suite;
a fixture's own command may also use `{dir}`, its directory. A typo
(`{bim}`) is a UsageError naming it and the known ones before anything
runs, instead of a `KeyError('bim')` once calibration has started.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Sequence
from pathlib import Path

from orchard.errors import UsageError

COMMAND = ("bin", "suite_dir", "workdir")
FIXTURE = (*COMMAND, "dir")

Template = list[str] | str | None


def _fields(template: Template) -> list[str]:
    """The placeholder names in a command template; unbalanced braces are an error of their own."""
    parts = [template] if isinstance(template, str) else template or []
    names = []
    for part in parts:
        try:
            names += [field for _, field, _, _ in string.Formatter().parse(part) if field is not None]
        except ValueError as error:
            raise ValueError(f"{error} in {part!r} (write {{{{ and }}}} for literal braces)") from None
    return names


def unknown(template: Template, allowed: Sequence[str]) -> str | None:
    """Why `template` cannot be filled (its first unknown placeholder and the known ones), or None."""
    try:
        fields = _fields(template)
    except ValueError as error:
        return str(error)
    for field in fields:
        if field not in allowed:
            known = ", ".join("{" + name + "}" for name in allowed)
            return f"unknown placeholder {{{field}}}; known: {known} (write {{{{ and }}}} for literal braces)"
    return None


def check(path: Path, fixtures: Sequence[str], commands: Iterable[tuple[str, Template, bool]]) -> None:
    """Refuse the suite at `path` if a command uses a placeholder nothing fills.

    `commands` are (where, template, is_fixture): where names the entry in the message.
    """
    named = tuple(f"fixture.{name}" for name in fixtures)
    for where, template, is_fixture in commands:
        problem = unknown(template, (*(FIXTURE if is_fixture else COMMAND), *named))
        if problem:
            raise UsageError(f"suite {path}: {where}: {problem}")
