"""Instruction counts per binary (a few each) where the A/A campaign found them deterministic, per pair where not."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from orchard.bench.binary import binary_sha256
from orchard.bench.campaigns.binary_counts import COUNTS, IDENTICAL_COUNTS, BinaryCounts
from orchard.bench.campaigns.campaign import run_verdict
from orchard.bench.campaigns.shared_campaign import run_shared_verdicts
from orchard.bench.deciding import calibration
from orchard.bench.deciding.verdict import Method, MetricVerdict, VerdictWord
from orchard.bench.machine import machine_facts, machine_fingerprint
from orchard.bench.measuring.measure import Observation, count_instructions, workbench
from orchard.bench.sandbox.confinement import RunConfinement, for_campaign
from orchard.bench.suites.suite import Suite
from orchard.bench.suites.suite_reader import load_suite
from orchard.cache import CACHE_ENV
from orchard.jsonlines import read_jsonl
from tests.helpers import make_binary, needs_valgrind

SUITE = """
[suite]
name = "counted"
runs = 6
min_runs = 6

[[scenario]]
name = "loop"
command = ["{bin}"]
measure = ["instructions"]

[[metric]]
name = "instructions"
"""

# its loop length comes from /dev/urandom: no two counts alike
RANDOM_LOOP = """#!/bin/sh
n=$(od -An -N1 -tu1 /dev/urandom)
i=0
while [ $i -lt $((1000 + n * 4)) ]; do i=$((i+1)); done
"""


def _suite(tmp_path: Path) -> Suite:
    (tmp_path / "suite.toml").write_text(SUITE)
    return load_suite(tmp_path / "suite.toml")


def _calibration(suite: Suite, spread: float, isolation: str, file: Path, sha256: str | None = None,
                 count: float = 1e6) -> Path:
    """What an A/A campaign of the baseline (of this sha256 and count, if given) found: instruction counts within
    `spread` of each other."""
    metrics, _ = calibration.compute(suite.metrics, {"loop/instructions": ([count] * 6, [count * (1 + spread)] * 6)},
                                     0.05)
    calibration.save(calibration.Calibration(
        suite=suite.name, suite_digest=suite.digest, machine_fingerprint=machine_fingerprint(), created_at=time.time(),
        runs=6, seed=1, baseline="base", metrics=metrics, machine=machine_facts(), file=file, env_isolation=isolation,
        baseline_sha256=sha256))
    return file


def test_the_a_a_spread_decides_which_scenarios_are_counted_per_binary(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    suite = _suite(tmp_path)
    identical, _ = calibration.compute(suite.metrics, {"loop/instructions": ([7e5] * 8, [7e5] * 8)}, 0.05)
    # the same binary counted 1,000,000 and 1,004,000 times: a 0.4% spread, twice the default floor
    varying, _ = calibration.compute(suite.metrics, {"loop/instructions": ([1e6, 1.004e6] * 4, [1.002e6] * 8)}, 0.05)
    assert identical["loop/instructions"].spread == 0.0
    assert varying["loop/instructions"].spread == pytest.approx(0.004)
    with workbench(suite) as bench:
        for metrics, counted in ((identical, {"loop"}), (varying, set())):
            cal = calibration.Calibration(suite.name, suite.digest, "m", 0.0, 8, 1, "base", metrics)
            assert BinaryCounts(suite, cal, bench, {}, None, {}).scenarios == counted  # type: ignore[arg-type]


def _counted_calibration(suite: Suite, base: Path, confinement: RunConfinement, file: Path) -> Path:
    """The calibration of an A/A campaign whose every count of `base` was identical: its count, taken as the
    campaign takes it (confined)."""
    with workbench(suite, confinement=confinement) as bench:
        counted = Observation("loop", "baseline", {}, None, None, True, "", {})
        count_instructions(bench, suite.scenarios[0], base, counted)
    return _calibration(suite, 0.0, confinement.isolation, file, binary_sha256(base), counted.row["instructions"])


@needs_valgrind
@pytest.mark.slow  # 3 cachegrind runs and 14 confined ones: 8 s at load 8 on 2 cores
def test_a_deterministic_binary_is_counted_once_and_the_calibrated_baseline_not_at_all(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every A/A count identical: the candidate is counted once, and the baseline, the very binary the calibration
    counted, not at all (its count is the calibration's), whatever the number of pairs."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    suite = _suite(tmp_path)
    base, more = make_binary(tmp_path, "base", iterations=2000), make_binary(tmp_path, "more", iterations=2060)
    confinement = for_campaign(suite.confine, suite.directory, base, more)
    cal = _counted_calibration(suite, base, confinement, tmp_path / "cal.json")
    verdict = run_verdict(suite, base, more, results=tmp_path / "results", calibration_file=cal,
                          confinement=confinement)
    (metric,) = verdict.metrics
    assert metric.method == Method.COUNTED and metric.verdict == MetricVerdict.REGRESSED, metric
    assert 0.01 < (metric.effect or 0) < 0.05 and f"counted {IDENTICAL_COUNTS}x per binary" in metric.note
    assert "the baseline not at all: its count is the A/A calibration's, 12 identical counts" in metric.note
    rows = read_jsonl(verdict.rows)
    counted = [r for r in rows if r.get("step_kind") == "counted"]
    assert sorted(r["role"] for r in counted) == ["candidate"] * IDENTICAL_COUNTS
    assert all(r["instructions"] > 0 and r["instructions_counting"] == "per binary" for r in counted)
    measured = [r for r in rows if r.get("step_kind") == "measured"]
    assert len(measured) == 2 * (verdict.pairs + 1)  # the warm-up pair and six judged ones, none counted
    assert all(r.get("instructions") is None and r["instructions_counting"] == "per binary" for r in measured)


@needs_valgrind
@pytest.mark.slow  # 5 cachegrind runs and 21 confined ones: 10 s at load 6.5 on 2 cores
def test_a_shared_campaign_counts_its_candidates_per_binary_not_in_its_rounds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    suite = _suite(tmp_path)
    base = make_binary(tmp_path, "base", iterations=2000)
    more, same = make_binary(tmp_path, "more", iterations=2060), make_binary(tmp_path, "same", iterations=2000)
    confinement = for_campaign(suite.confine, suite.directory, base, more, same)
    cal = _counted_calibration(suite, base, confinement, tmp_path / "cal.json")
    shared = run_shared_verdicts(suite, base, [more, same], results=tmp_path / "results", calibration_file=cal,
                                 confinement=confinement)
    assert [v.verdict for v in shared.verdicts] == [VerdictWord.REGRESSED, VerdictWord.NO_CHANGE]
    assert all(v.metrics[0].method == Method.COUNTED for v in shared.verdicts)
    rows = read_jsonl(shared.verdicts[0].rows)
    counted = [r for r in rows if r.get("step_kind") == "counted"]
    assert sorted(r["binary"] for r in counted) == sorted([str(more), str(same)] * IDENTICAL_COUNTS)
    measured = [r for r in rows if r.get("step_kind") == "measured"]
    assert len(measured) == shared.runs and all(r.get("instructions") is None for r in measured)


@needs_valgrind
@pytest.mark.slow  # 2 x 6 cachegrind runs and 14 confined ones: 22 s at load 4.5 on 2 cores
def test_a_candidate_whose_count_varies_is_counted_per_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    suite = _suite(tmp_path)
    base = make_binary(tmp_path, "base", iterations=1500)
    random_loop = tmp_path / "random"
    random_loop.write_text(RANDOM_LOOP)
    random_loop.chmod(0o755)
    confinement = for_campaign(suite.confine, suite.directory, base, random_loop)
    # A/A counts within the tolerance but not identical: each binary is counted a few times, which shows this one
    cal = _calibration(suite, 0.0001, confinement.isolation, tmp_path / "cal.json")
    verdict = run_verdict(suite, base, random_loop, results=tmp_path / "results", calibration_file=cal,
                          confinement=confinement)
    (metric,) = verdict.metrics
    assert metric.method == Method.HODGES_LEHMANN and metric.n == verdict.pairs >= 6, metric  # 6: runs
    assert metric.note.startswith(f"counted per pair: the candidate's {COUNTS} counts of instructions spread")
    rows = read_jsonl(verdict.rows)
    counted = [r for r in rows if r.get("step_kind") == "counted"]
    # each binary counted once per judged pair: the first three counts serve as the first three pairs', the first
    # look's six pairs get theirs then, and any later pair (past runs, an open metric) is counted in its own rows
    assert sorted(r["role"] for r in counted) == ["baseline"] * 6 + ["candidate"] * 6
    assert all(r["instructions"] > 0 for r in rows if r.get("step_kind") == "measured" and r["pair"] > 6)
    assert len({r["instructions"] for r in counted if r["role"] == "candidate"}) > 1
