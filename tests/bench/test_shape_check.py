"""A measured run that cannot tell it is measured (issue 36.5).

Each hostile candidate prints a terse output (fewer bytes: a win on
stdout_bytes) only when it believes it is measured, and the baseline's
output otherwise. The timed runs look like an ordinary user's, so the tells
of the old sandbox (HOME under /tmp, ORCHARD_ variables) never fire; a
candidate that learned the ordinary shape (HOME in /home, the working
directory's name, how many variables there are) prints differently in the
verdict's other shape and fails the gate "behaves differently when it can
tell it is measured". An honest candidate that is always terse still PASSes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from orchard.bench.campaigns.campaign import run_verdict
from orchard.bench.checks.shape_check import GATE
from orchard.bench.deciding.verdict import VerdictWord
from orchard.bench.sandbox.confinement import confine_runs
from orchard.bench.sandbox.environment import isolated_env
from orchard.bench.suites.suite_reader import load_suite

pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")]

SUITE = """[suite]
name = "shape"
runs = 8
min_runs = 8
calibration_runs = 6

[[scenario]]
name = "report"
command = ["{bin}", "{suite_dir}/input.txt"]
expect = ["total: 3"]

[[metric]]
name = "stdout_bytes"

[[gate]]
kind = "information_recall"
"""
FULL = "printf 'total: 3\\npadding padding padding padding\\n'"
TERSE = "printf 'total: 3\\n'"
BASELINE = f"#!/bin/sh\n{FULL}\n"


def _sniffer(sniff: str) -> str:
    return f"#!/bin/sh\nif {sniff}; then {TERSE}; else {FULL}; fi\n"


def _ordinary_count() -> int:
    """How many variables a timed run gets (`env` may add one or two of its own)."""
    return len(confine_runs(True).env(isolated_env()))


OLD_TELLS = {
    "HOME under /tmp": 'case "$HOME" in /tmp/*) true;; *) false;; esac',
    "ORCHARD_ variables": "env | grep -q '^ORCHARD_'",
}
LEARNED = {
    "HOME in /home": 'case "$HOME" in /home/*) true;; *) false;; esac',
    "the working directory's name": '[ "$(basename "$PWD")" = bench ]',
    "how many variables": '[ "$(env | wc -l)" -le COUNT ]',
}


def _verdict(tmp_path: Path, candidate: str) -> tuple[VerdictWord, list[str], list[str]]:
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "suite.toml").write_text(SUITE)
    (bench / "input.txt").write_text("a b c\n")
    binaries = []
    for name, text in (("base", BASELINE), ("cand", candidate)):
        path = tmp_path / "bin" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(text.replace("COUNT", str(_ordinary_count() + 2)))
        path.chmod(0o755)
        binaries.append(path)
    verdict = run_verdict(load_suite(bench / "suite.toml"), *binaries, results=tmp_path / "results", seed=5)
    assert verdict.confinement and verdict.confinement.startswith("measured runs confined"), verdict.confinement
    return verdict.verdict, verdict.reasons, [gate.name for gate in verdict.gates if not gate.passed]


@pytest.mark.parametrize("tell", OLD_TELLS)
def test_the_old_sandboxs_tells_are_gone_from_the_timed_runs(tmp_path: Path, tell: str) -> None:
    word, reasons, _ = _verdict(tmp_path, _sniffer(OLD_TELLS[tell]))
    assert word != VerdictWord.PASS, reasons  # it never saw itself measured: no terse output, no win


@pytest.mark.parametrize("tell", LEARNED)
def test_a_candidate_that_learned_the_timed_shape_is_regressed(tmp_path: Path, tell: str) -> None:
    word, reasons, failed = _verdict(tmp_path, _sniffer(LEARNED[tell]))
    assert word == VerdictWord.REGRESSED and GATE in failed, (word, reasons, failed)


def test_an_honest_terse_candidate_passes(tmp_path: Path) -> None:
    word, reasons, failed = _verdict(tmp_path, f"#!/bin/sh\n{TERSE}\n")
    assert word == VerdictWord.PASS and not failed, (word, reasons, failed)
