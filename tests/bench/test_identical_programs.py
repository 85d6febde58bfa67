"""Identical programs are judged without measuring: a docs-only pull request is NO-CHANGE at once, saying why."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

from orchard.bench.checks.identical import same_program
from tests.test_ci_example import WORKFLOW_SUITE

SUITE = WORKFLOW_SUITE  # wall and CPU time: noise, were the two programs measured


def _checkout(root: Path, name: str) -> Path:
    """One checkout of the project, built: its binary is build/prog, made from src/prog.sh."""
    repo = root / name
    for relative, text in {"src/prog.sh": '#!/bin/sh\necho "total words: 42"\n', "README.md": "# prog\n",
                           "bench/suite.toml": SUITE, "LICENSE": "MIT\n", "docs/guide.txt": "how to\n"}.items():
        (repo / relative).parent.mkdir(parents=True, exist_ok=True)
        (repo / relative).write_text(text)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    _build(repo)
    return repo


def _build(repo: Path) -> Path:
    (repo / "build").mkdir(exist_ok=True)
    shutil.copy(repo / "src" / "prog.sh", repo / "build" / "prog")
    (repo / "build" / "prog").chmod(0o755)
    return repo / "build" / "prog"


def test_a_docs_only_change_is_no_change_without_measuring_in_every_output(tmp_path: Path) -> None:
    base, head = _checkout(tmp_path, "base"), _checkout(tmp_path, "head")
    (head / "README.md").write_text("# prog\n\nNow with a usage section.\n")
    (head / "docs" / "guide.txt").write_text("how to, rewritten\n")
    (head / "LICENSE").write_text("MIT, 2026\n")
    (head / "src" / "notes.rst").write_text("design notes\n")
    command = [sys.executable, "-m", "orchard", "verdict", "--suite", str(base / "bench/suite.toml"),
               "--baseline", str(base / "build/prog"), "--candidate", str(head / "build/prog"),
               "--results", str(tmp_path / "results"), "--fail-on", "inconclusive"]
    exports = ["--export-markdown", str(tmp_path / "v.md"), "--export-json", str(tmp_path / "v.json"),
               "--export-csv", str(tmp_path / "v.csv")]
    done = subprocess.run([*command, "--json", *exports], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["verdict"] == "NO-CHANGE" and document["pairs"] == 0 and document["metrics"] == []
    assert document["calibration"] is None  # nothing was measured, not even the A/A calibration
    [reason] = document["reasons"]
    assert reason.startswith("identical programs, not measured: the baseline's and the candidate's binaries")
    assert "identical programs, not measured" in (tmp_path / "v.md").read_text()
    assert json.loads((tmp_path / "v.json").read_text())["reasons"] == [reason]
    [_, line] = list(csv.reader((tmp_path / "v.csv").read_text().splitlines()))
    assert line[:3] == ["", "NO-CHANGE", reason]
    shown = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "verdict: NO-CHANGE" in shown.stdout
    assert "identical programs, not measured" in " ".join(shown.stdout.split())
    assert "pair order seed" not in shown.stdout and "calibration" not in shown.stdout


def test_any_byte_the_program_runs_makes_it_another_program(tmp_path: Path) -> None:
    base, head = _checkout(tmp_path, "base"), _checkout(tmp_path, "head")
    suite_dir = base / "bench"
    assert same_program(suite_dir, base / "build/prog", head / "build/prog")
    (head / "bench" / "suite.toml").write_text(SUITE + "\n# the head's own copy of the bench\n")
    (head / "src" / "__pycache__").mkdir()
    (head / "src" / "__pycache__" / "x.pyc").write_bytes(b"\x00")
    assert same_program(suite_dir, base / "build/prog", head / "build/prog")  # the bench and caches left out
    (head / "src" / "helper.sh").write_text("echo helper\n")  # a file the program could run, beside it
    assert same_program(suite_dir, base / "build/prog", head / "build/prog") == ""
    (head / "src" / "helper.sh").unlink()
    (head / "src" / "prog.sh").write_text('#!/bin/sh\necho "total words: 43"\n')
    _build(head)
    assert same_program(suite_dir, base / "build/prog", head / "build/prog") == ""


def test_measure_identical_measures_them_anyway(tmp_path: Path) -> None:
    base = _checkout(tmp_path, "base")
    suite = base / "bench" / "suite.toml"
    suite.write_text(SUITE.replace('"wall_ms"', '"stdout_bytes"').replace('"cpu_ms"', '"tool_call_count"'))
    done = subprocess.run([sys.executable, "-m", "orchard", "verdict", "--suite", str(suite),
                           "--baseline", str(base / "build/prog"), "--candidate", str(base / "build/prog"),
                           "--results", str(tmp_path / "results"), "--json", "--measure-identical", "--no-confine"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["pairs"] >= 6
    assert [m["key"] for m in document["metrics"]] == ["report/stdout_bytes", "report/tool_call_count"]
