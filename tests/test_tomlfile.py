"""The one strict TOML reader: every problem names the file and the place; unknown keys are errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchard.errors import UsageError
from orchard.tomlfile import read_table


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "thing.toml"
    path.write_text(text)
    return path


def test_typed_values_and_defaults(tmp_path: Path) -> None:
    root = read_table(_file(tmp_path, 'title = "x"\n[workers]\ncount = 3\nrate = 2\n'), "config")
    workers = root.table("workers")
    assert (workers.get("count", int), workers.get("rate", (int, float)), workers.get("idle", bool, False)) == (
        3, 2, False
    )
    workers.finish()
    assert root.get("title", str) == "x"
    assert root.table("absent").data == {}
    root.finish()


@pytest.mark.parametrize(
    ("text", "read", "message"),
    [
        ("[workers]\ncount = 2\ncolour = 1\n", "workers", r"\[workers\]: unknown key `colour`; known: count"),
        ("[workers]\ncount = true\n", "workers", r"\[workers\]: 'count' must be an integer, not a boolean"),
        ('[workers]\ncount = "2"\n', "workers", r"\[workers\]: 'count' must be an integer, not str"),
        ("[workers]\n", "workers", r"\[workers\]: missing required key 'count'"),
        ("workers = 2\n", "workers", r"top level: 'workers' must be a table, not int"),
        ("[workers]\ncount = 2\n[other]\n", "root", r"top level: unknown key `other`; known: workers"),
    ],
)
def test_each_problem_names_file_and_key(tmp_path: Path, text: str, read: str, message: str) -> None:
    path = _file(tmp_path, text)
    with pytest.raises(UsageError, match=rf"^config {path}: {message}"):
        root = read_table(path, "config")
        workers = root.table("workers")
        workers.get("count", int, required=True)
        workers.finish()
        root.finish()


def test_bad_toml_and_absent_files_name_the_file_and_line(tmp_path: Path) -> None:
    path = _file(tmp_path, 'ok = 1\nbroken = "no end\n')
    with pytest.raises(UsageError, match=rf"^config {path}: invalid TOML: .*line 2"):
        read_table(path, "config")
    with pytest.raises(UsageError, match=r"^config file not found: .*absent.toml"):
        read_table(tmp_path / "absent.toml", "config")
    path.write_bytes(b"ok = '\xff'\n")
    with pytest.raises(UsageError, match=rf"^config {path}: invalid TOML"):
        read_table(path, "config")
