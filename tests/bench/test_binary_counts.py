"""Instruction counts per binary (a few each) where the A/A campaign found them deterministic, per pair where not."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from orchard.bench import calibration
from orchard.bench.binary_counts import COUNTS, BinaryCounts
from orchard.bench.campaign import run_verdict
from orchard.bench.confinement import for_campaign
from orchard.bench.machine import machine_facts, machine_fingerprint
from orchard.bench.measure import workbench
from orchard.bench.suite import Suite
from orchard.bench.suite_reader import load_suite
from orchard.bench.verdict import Method, MetricVerdict
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


def _calibration(suite: Suite, spread: float, isolation: str, file: Path) -> Path:
    """What an A/A campaign of the baseline found: instruction counts within `spread` of each other."""
    metrics, _ = calibration.compute(suite.metrics, {"loop/instructions": ([1e6] * 6, [1e6 * (1 + spread)] * 6)}, 0.05)
    calibration.save(calibration.Calibration(
        suite=suite.name, suite_digest=suite.digest, machine_fingerprint=machine_fingerprint(), created_at=time.time(),
        runs=6, seed=1, baseline="base", metrics=metrics, machine=machine_facts(), file=file, env_isolation=isolation))
    return file


def test_the_a_a_spread_decides_which_scenarios_are_counted_per_binary(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(calibration.CACHE_ENV, str(tmp_path / "cache"))
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


@needs_valgrind
@pytest.mark.slow  # 6 cachegrind runs and 14 confined ones: 6.6 s at load 4.5 on 2 cores, 19 s at load 15
def test_a_deterministic_binary_is_counted_a_few_times_not_once_per_pair(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(calibration.CACHE_ENV, str(tmp_path / "cache"))
    suite = _suite(tmp_path)
    base, more = make_binary(tmp_path, "base", iterations=2000), make_binary(tmp_path, "more", iterations=2060)
    confinement = for_campaign(suite.confine, suite.directory, base, more)
    cal = _calibration(suite, 0.0, confinement.isolation, tmp_path / "cal.json")
    verdict = run_verdict(suite, base, more, results=tmp_path / "results", calibration_file=cal,
                          confinement=confinement)
    (metric,) = verdict.metrics
    assert metric.method == Method.COUNTED and metric.verdict == MetricVerdict.REGRESSED, metric
    assert 0.01 < (metric.effect or 0) < 0.05 and f"counted {COUNTS}x per binary" in metric.note
    rows = read_jsonl(verdict.rows)
    counted = [r for r in rows if r.get("step_kind") == "counted"]
    assert sorted(r["role"] for r in counted) == ["baseline"] * COUNTS + ["candidate"] * COUNTS
    assert all(r["instructions"] > 0 and r["instructions_counting"] == "per binary" for r in counted)
    measured = [r for r in rows if r.get("step_kind") == "measured"]
    assert len(measured) == 2 * (verdict.pairs + 1)  # the warm-up pair and six judged ones, none counted
    assert all(r.get("instructions") is None and r["instructions_counting"] == "per binary" for r in measured)


@needs_valgrind
@pytest.mark.slow  # 2 x 6 cachegrind runs and 14 confined ones: 22 s at load 4.5 on 2 cores
def test_a_candidate_whose_count_varies_is_counted_per_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(calibration.CACHE_ENV, str(tmp_path / "cache"))
    suite = _suite(tmp_path)
    base = make_binary(tmp_path, "base", iterations=1500)
    random_loop = tmp_path / "random"
    random_loop.write_text(RANDOM_LOOP)
    random_loop.chmod(0o755)
    confinement = for_campaign(suite.confine, suite.directory, base, random_loop)
    cal = _calibration(suite, 0.0, confinement.isolation, tmp_path / "cal.json")
    verdict = run_verdict(suite, base, random_loop, results=tmp_path / "results", calibration_file=cal,
                          confinement=confinement)
    (metric,) = verdict.metrics
    assert metric.method == Method.HODGES_LEHMANN and metric.n == verdict.pairs == 6, metric
    assert metric.note.startswith(f"counted per pair: the candidate's {COUNTS} counts of instructions spread")
    counted = [r for r in read_jsonl(verdict.rows) if r.get("step_kind") == "counted"]
    # each binary counted once per judged pair: the first three counts serve as the first three pairs'
    assert sorted(r["role"] for r in counted) == ["baseline"] * 6 + ["candidate"] * 6
    assert len({r["instructions"] for r in counted if r["role"] == "candidate"}) > 1
