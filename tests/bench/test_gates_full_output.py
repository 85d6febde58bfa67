"""Gates judge the whole output, not the part an agent would read.

Each program prints ~30 KB and a default suite admits 20,000 characters: the
difference that matters sits past the admitted part.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from orchard.bench.campaigns.campaign import run_verdict
from orchard.bench.suites.suite_reader import load_suite
from tests.helpers import orchard

HEAD = (
    'i=0; while [ $i -lt 600 ]; do echo "line $i of a long deterministic report, padded out to fifty"; i=$((i+1)); done'
)

PROGRAMS = {
    "base": f'{HEAD}\necho "fact: omega"\necho "count 15000"\n',
    "random-tail": f'{HEAD}\necho "fact: omega"\necho "count 15000"\necho "nonce $$ $(date +%N)"\n',
    "drops-fact": f'{HEAD}\necho "count 15000"\n',
    "fails-late": f'{HEAD}\necho "fact: omega"\necho "count 15000"\nexit 1\n',
    "longer": f'{HEAD}\necho "fact: omega"\necho "count 15000"\necho "one more line"\n',
}

SUITE = """
[suite]
name = "long"
runs = 6
min_runs = 6
calibration_runs = 6
{extra}

[[scenario]]
name = "long"
command = ["{{bin}}"]
expect_file = "facts.txt"

[[metric]]
name = "cpu_ms"
floor = 0.5

[[gate]]
kind = "{kind}"
{gate}
"""


def _lab(tmp_path: Path, kind: str, gate: str = "", extra: str = "") -> Path:
    for name, body in PROGRAMS.items():
        path = tmp_path / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
    (tmp_path / "facts.txt").write_text("count 15000\n\nfact: omega\n")
    (tmp_path / "suite.toml").write_text(SUITE.format(kind=kind, gate=gate, extra=extra))
    return tmp_path


def _verdict(lab: Path, candidate: str, *, confine: bool = False) -> dict:
    """The verdict's JSON document (what `orchard verdict --json` prints), measured in process; unconfined unless
    `confine`: a confined run's output reaches the gates the same way, at ~0.2 s a run."""
    suite = replace(load_suite(lab / "suite.toml"), confine=confine)
    return run_verdict(suite, lab / "base", lab / candidate, results=lab / "results").to_dict()


def _failed(report: dict) -> list[str]:
    return [g["name"] for g in report["gates"] if not g["passed"]]


def test_the_programs_print_far_more_than_is_admitted(tmp_path: Path) -> None:
    lab = _lab(tmp_path, "determinism")
    assert (lab / "base").stat().st_size < 1000
    report = _verdict(lab, "longer", confine=True)
    assert report["verdict"] != "REGRESSED", report


@pytest.mark.parametrize("extra", ["", "admitted_output_chars = 100000"])
def test_a_random_tail_past_the_admitted_part_fails_determinism(tmp_path: Path, extra: str) -> None:
    report = _verdict(_lab(tmp_path, "determinism", extra=extra), "random-tail")
    assert report["verdict"] == "REGRESSED"
    assert _failed(report) == ["determinism"]


def test_a_fact_dropped_past_the_admitted_part_fails_information_recall(tmp_path: Path) -> None:
    report = _verdict(_lab(tmp_path, "information_recall"), "drops-fact")
    assert report["verdict"] == "REGRESSED"
    assert _failed(report) == ["information_recall"]


def test_no_drop_on_recall_reads_the_whole_output(tmp_path: Path) -> None:
    report = _verdict(_lab(tmp_path, "no_drop", 'metric = "information_recall"'), "drops-fact")
    assert report["verdict"] == "REGRESSED"
    assert _failed(report) == ["no_drop"]


def test_hold_on_recall_reads_the_whole_output(tmp_path: Path) -> None:
    lab = _lab(tmp_path, "hold", 'metric = "information_recall"\nvalue = 1.0')
    assert _failed(_verdict(lab, "longer")) == []
    report = _verdict(lab, "drops-fact")
    assert report["verdict"] == "REGRESSED"
    assert _failed(report) == ["hold"]


def test_an_exit_status_after_long_output_fails(tmp_path: Path) -> None:
    report = _verdict(_lab(tmp_path, "determinism"), "fails-late")
    assert report["verdict"] == "REGRESSED"
    assert "exit_status" in _failed(report)


def test_a_command_gate_sees_the_binary_not_the_admitted_output(tmp_path: Path) -> None:
    gate = "command = \"{bin} | grep -q 'fact: omega'\""
    report = _verdict(_lab(tmp_path, "command", gate), "drops-fact")
    assert report["verdict"] == "REGRESSED"
    assert _failed(report) == ["command"]


def test_expect_file_names_a_file_that_exists(tmp_path: Path) -> None:
    lab = _lab(tmp_path, "information_recall")
    (lab / "facts.txt").unlink()
    result = orchard("verdict", "--suite", "suite.toml", "--baseline", "base", "--candidate", "base", cwd=lab)
    assert result.returncode == 2
    assert "expect_file" in result.stderr and "facts.txt" in result.stderr
