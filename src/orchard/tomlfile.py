"""One strict reader for orchard's TOML files (suites, flows, subjects; the lab's config next).

Every problem in a file a user wrote is one `UsageError` that names the file
and the place: `suite /x/s.toml: [suite]: 'runs' must be an
integer, not str`, or the line and column of a syntax error. Unknown keys
are errors everywhere, so a typo is never silently ignored.

Why tomllib and this small helper rather than a schema library: msgspec
(`Struct(forbid_unknown_fields=True)`, tried with 0.23) names the place as
`$.fixture[0]` ("Object contains unknown field `colour` - at
`$.fixture[0]`"), not as the fixture's name, gives no line once the TOML has
parsed, and cannot state the checks orchard's files need beyond types
(placeholders a lane knows, scenario names a gate refers to, free-keyed env
tables); pydantic is the same trade at a larger size. Each reader would keep
a second, hand-written pass with a second style of message. One `Table` that
pulls typed values, names the key path and refuses leftovers at `finish()`
covers every file with one message format and no new dependency.

Lab use (config.py, backlog.py):

    root = read_table(path, "config")              # Table of the whole file
    workers = root.table("workers")                # a sub-table, {} when absent
    count = workers.get("count", int, 2)
    workers.finish()                               # unknown keys -> UsageError
    root.finish()
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

from orchard.errors import UsageError

_KIND_NAMES = {list: "a list", str: "a string", int: "an integer", float: "a number", bool: "true or false",
               dict: "a table"}


def read_toml(path: Path | str, what: str) -> dict[str, Any]:
    """The decoded file; absent, unreadable or invalid TOML is one UsageError naming `what`, file and line."""
    return parse_toml(read_bytes(path, what), path, what)


def read_bytes(path: Path | str, what: str) -> bytes:
    """The file's bytes (for a digest of exactly what `parse_toml` reads)."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{what} file not found: {path}") from None
    except OSError as error:
        raise UsageError(f"cannot read {what} file {path}: {error.strerror}") from None


def parse_toml(raw: bytes, path: Path | str, what: str) -> dict[str, Any]:
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise UsageError(f"{what} {path}: invalid TOML: {error}") from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise UsageError(f"{what} {path}: invalid TOML: arrays or tables nested too deeply") from None


def read_table(path: Path | str, what: str) -> Table:
    """The whole file as a strict `Table` (call `finish()` once every known key is read)."""
    return Table(f"{what} {path}", "top level", read_toml(path, what))


def kind_names(kinds: type | tuple[type, ...]) -> str:
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    return " or ".join(dict.fromkeys(_KIND_NAMES.get(kind, kind.__name__) for kind in kinds))


def unknown_key(keys: Iterable[str], allowed: Iterable[str]) -> str | None:
    """The message for the first key not in `allowed` (listing the known ones), or None."""
    allowed = tuple(allowed)
    unknown = sorted(set(keys) - set(allowed))
    return f"unknown key `{unknown[0]}`; known: {', '.join(allowed)}" if unknown else None


class Table:
    """One TOML table read strictly: typed values, the place named in every error, no unknown keys.

    `label` names the file ("suite /x/s.toml"), `where` the table in it
    ("[suite]", "[[scenario]] 'cold'"); `where` may be renamed once the
    table's own name is known.
    """

    def __init__(self, label: str, where: str, value: Any) -> None:
        self.label = label
        self.where = where
        if not isinstance(value, dict):
            self.fail(f"must be a table, not {type(value).__name__}")
        self.data: dict[str, Any] = value
        self.used: set[str] = set()

    def fail(self, message: str) -> NoReturn:
        raise UsageError(f"{self.label}: {self.where}: {message}")

    def get(self, key: str, kinds: type | tuple[type, ...], default: Any = ..., *, required: bool = False) -> Any:
        """The value of `key`, checked to be one of `kinds` (a bool is never taken for a number)."""
        self.used.add(key)
        if key not in self.data:
            if required or default is ...:
                self.fail(f"missing required key '{key}'")
            return default
        value = self.data[key]
        if isinstance(value, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)):
            self.fail(f"'{key}' must be {kind_names(kinds)}, not a boolean")
        if not isinstance(value, kinds):
            self.fail(f"'{key}' must be {kind_names(kinds)}, not {type(value).__name__}")
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.get(key, list, [])
        if not all(isinstance(item, str) for item in value):
            self.fail(f"'{key}' must be a list of strings")
        return tuple(value)

    def table(self, key: str, where: str | None = None) -> Table:
        """The sub-table `key` ({} when absent) as its own strict Table."""
        return Table(self.label, where or f"[{key}]", self.get(key, dict, {}))

    def tables(self, key: str) -> list[Any]:
        """The raw entries of an array of tables (`[[key]]`), [] when absent."""
        self.used.add(key)
        value = self.data.get(key, [])
        if not isinstance(value, list):
            self.fail(f"'{key}' must be an array of tables ([[{key}]])")
        return value

    def skip(self, *keys: str) -> None:
        """Mark keys another reader checks, so `finish()` does not call them unknown."""
        self.used.update(keys)

    def finish(self) -> None:
        """Every key of the table must have been read (or skipped): else the first unknown one is named."""
        problem = unknown_key(self.data, sorted(self.used))
        if problem:
            self.fail(problem)
