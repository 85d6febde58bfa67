"""Subjects: explicit binaries with version and sha256; bad ones are exit 2."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from orchard.bench.suites.subjects import parse_binaries, parse_subjects
from orchard.errors import UsageError
from tests.bench.lanes_support import LaneEnv, invoke, without_oak_on_path

KINDS = {"git", "oak"}


def test_git_by_name_records_version_and_sha256() -> None:
    (git,) = parse_subjects("git", KINDS)
    real = Path(shutil.which("git") or "").resolve()
    assert git.bin == real
    assert git.kind == "git"
    assert git.version and git.version.startswith("git version")
    assert git.sha256 == hashlib.sha256(real.read_bytes()).hexdigest()
    assert git.row_fields()["subject_binary_sha256"] == git.sha256


def test_absent_named_binary_becomes_a_skip_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    without_oak_on_path(monkeypatch)
    git, oak = parse_subjects("git,oak", KINDS)
    assert oak.bin is None and "oak" in (oak.absent_reason or "")
    assert git.bin is not None


def test_default_is_every_subject_in_the_shipped_file(monkeypatch: pytest.MonkeyPatch) -> None:
    without_oak_on_path(monkeypatch)
    assert [s.name for s in parse_subjects(None, KINDS)] == ["git", "oak"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("oak=/nonexistent/oak", "/nonexistent/oak does not exist"),
        ("oak={tmp}/plain.txt", "not an executable file"),
        ("oak={tmp}", "not an executable file"),
        ("mine=/usr/bin/env", "cannot tell its kind"),
        ("nosuch", "unknown subject 'nosuch'"),
        ("git,git", "given twice"),
        ("x:hg=/usr/bin/env", "no flow for kind 'hg'"),
        ("x:git", "needs =BIN"),
    ],
)
def test_bad_subjects_are_usage_errors(tmp_path: Path, spec: str, message: str) -> None:
    (tmp_path / "plain.txt").write_text("not a program\n")
    with pytest.raises(UsageError, match=message):
        parse_subjects(spec.format(tmp=tmp_path), KINDS)


def test_name_kind_equals_bin_and_subjects_file(tmp_path: Path) -> None:
    (custom,) = parse_subjects(f"mine:git={shutil.which('git')}", KINDS)
    assert (custom.name, custom.kind) == ("mine", "git")
    table = tmp_path / "subjects.toml"
    table.write_text('[stock]\nkind = "git"\nlabel = "stock git"\nbin = "git"\n')
    (stock,) = parse_subjects("stock", KINDS, table)
    assert (stock.kind, stock.label) == ("git", "stock git") and stock.bin is not None
    table.write_text("[broken]\nkind = 'git'\n")
    with pytest.raises(UsageError, match=r"\[broken\]: missing required key 'bin'"):
        parse_subjects("broken", KINDS, table)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[stock]\nkind = "git"\nbin = "git"\ncolour = "red"\n', r"\[stock\]: unknown key `colour`"),
        ('[stock]\nkind = "git"\nbin = 7\n', r"\[stock\]: 'bin' must be a string, not int"),
        ('stock = "git"\n', r"top level: 'stock' must be a table, not str"),
        ('[stock]\nbin = "git\n', r"invalid TOML: .*line 2"),
    ],
)
def test_a_subjects_file_is_read_strictly(tmp_path: Path, text: str, message: str) -> None:
    table = tmp_path / "subjects.toml"
    table.write_text(text)
    with pytest.raises(UsageError, match=rf"subjects {table}: {message}"):
        parse_subjects("stock", KINDS, table)


def test_bench_run_subjects_are_explicit_name_bin_pairs(tmp_path: Path) -> None:
    tool = tmp_path / "tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert parse_binaries([f"fast={tool}"]) == {"fast": tool.resolve()}
    for specs, message in (([], "at least one --subject"), (["fast"], "NAME=BIN"), (["a:git=/bin/true"], "NAME=BIN"),
                           ([f"a={tool}", f"a={tool}"], "'a' is given twice")):
        with pytest.raises(UsageError, match=message):
            parse_binaries(specs)


def test_cli_missing_binary_exits_2_and_records_nothing(lane_env: LaneEnv) -> None:
    result = invoke("bench", "task-loop", "--subjects", "git,oak=/nonexistent/oak", "--results", str(lane_env.results))
    assert result.exit_code == 2
    assert "binary /nonexistent/oak does not exist" in result.output
    assert not lane_env.results.exists()
