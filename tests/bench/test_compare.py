"""`orchard compare OLD.jsonl NEW.jsonl`: two stored result sets judged without measuring again."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchard.bench.results.compare import compare
from tests.helpers import make_binary, make_suite, orchard

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _bench_run(lab: Path, binary: str, runs: int, results: str) -> Path:
    result = orchard(
        "bench",
        "run",
        "--suite",
        "suite.toml",
        "--subject",
        f"prog={binary}",
        "--runs",
        str(runs),
        "--results",
        results,
        cwd=lab,
    )
    assert result.returncode == 0, result.stderr
    return next((lab / results / "bench").glob("*.jsonl"))


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    make_binary(tmp_path, "fast", iterations=10000)
    make_binary(tmp_path, "slow", iterations=25000)
    make_suite(tmp_path)
    return tmp_path


@pytest.mark.slow
def test_two_bench_runs_one_after_the_other_are_not_called_paired(lab: Path) -> None:
    old = _bench_run(lab, "fast", 8, "old")
    new = _bench_run(lab, "slow", 8, "new")
    result = orchard("compare", old, new, "--json", cwd=lab)
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    # two bench runs, one after the other: their run numbers line up, their moments do not
    assert report["schema"] == "orchard.compare/1" and report["paired"] is False
    assert [w for w in report["warnings"] if "measured apart" in w and "not paired" in w], report["warnings"]
    assert report["verdict"] == "REGRESSED"
    by_metric = {m["metric"]: m for m in report["metrics"]}
    assert by_metric["cpu_ms"]["verdict"] == "regressed" and by_metric["cpu_ms"]["effect_percent"] > 30
    assert (by_metric["stdout_bytes"]["method"], by_metric["stdout_bytes"]["verdict"]) == ("exact", "no-change")
    same = orchard("compare", old, old, cwd=lab)
    assert same.returncode == 0 and "paired comparison" in same.stdout


def _rows(path: Path, cpu_ms: float, starts_s: list[float]) -> Path:
    """Rows of one subject, run i started `starts_s[i]` seconds after T0 and lasting half a second."""
    rows = [{"step_kind": "measured", "returncode": 0, "scenario": "s", "subject": path.stem, "run": i,
             "elapsed_ms": cpu_ms * (1 + 0.01 * (i % 3)), "cpu_ms": cpu_ms * (1 + 0.01 * (i % 3)),
             "started_at": (T0 + timedelta(seconds=t)).isoformat(),
             "ended_at": (T0 + timedelta(seconds=t + 0.5)).isoformat()} for i, t in enumerate(starts_s)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_interleaved_runs_are_paired_and_campaigns_measured_apart_are_not(tmp_path: Path) -> None:
    old = _rows(tmp_path / "old.jsonl", 100.0, [2.0 * i for i in range(8)])
    interleaved = compare(old, _rows(tmp_path / "new.jsonl", 130.0, [2.0 * i + 1 for i in range(8)]))
    assert interleaved.paired and interleaved.warnings == []
    apart = compare(old, _rows(tmp_path / "later.jsonl", 130.0, [600.0 + 2.0 * i for i in range(8)]))
    assert not apart.paired
    assert apart.warnings == ["s: measured apart (586 s between the two campaigns, not interleaved): their run "
                              "numbers line up but the runs share no moment, so they are not paired: compared unpaired"]
    assert {m.method for m in apart.decision.metrics} == {"hodges-lehmann-unpaired"}


def test_a_pyperf_file_is_named_as_one_beside_orchard_rows(tmp_path: Path) -> None:
    out = tmp_path / "pyperf.json"
    subprocess.run([sys.executable, "-m", "pyperf", "timeit", "--quiet", "--processes", "1", "--values", "3",
                    "--loops", "10", "-o", str(out), "sum(range(100))"], check=True, capture_output=True)
    rows = _rows(tmp_path / "rows.jsonl", 1.0, [0.0] * 3)
    result = orchard("compare", rows, out, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert f"holds orchard rows and {out} pyperf results: compare two files of one tool" in result.stderr
    assert "Traceback" not in result.stderr


def test_runs_that_do_not_line_up_are_compared_unpaired_with_a_warning(tmp_path: Path) -> None:
    # written rows, not measured ones: the unpaired path is the point, and the slow tier measures real bench runs
    old = _rows(tmp_path / "old.jsonl", 100.0, [2.0 * i for i in range(8)])
    new = _rows(tmp_path / "new.jsonl", 250.0, [2.0 * i + 1 for i in range(6)])
    report = json.loads(orchard("compare", old, new, "--json", cwd=tmp_path).stdout)
    assert report["paired"] is False
    assert any("do not line up" in w and "compared unpaired" in w for w in report["warnings"])
    cpu = next(m for m in report["metrics"] if m["metric"] == "cpu_ms")
    assert cpu["method"] == "hodges-lehmann-unpaired" and cpu["verdict"] == "regressed"
    text = orchard("compare", old, new, cwd=tmp_path)
    assert "unpaired comparison" in text.stdout and "warning:" in text.stdout


@pytest.mark.slow
def test_bad_inputs_exit_2_naming_the_file(lab: Path) -> None:
    old = _bench_run(lab, "fast", 6, "old")
    missing = orchard("compare", old, lab / "nope.jsonl", cwd=lab)
    assert missing.returncode == 2 and "nope.jsonl" in missing.stderr
    empty = lab / "empty.jsonl"
    empty.write_text("")
    result = orchard("compare", old, empty, cwd=lab)
    assert result.returncode == 2 and "empty.jsonl: no successful measured rows" in result.stderr
    other = lab / "other-machine.jsonl"
    rows = [json.loads(line) for line in old.read_text().splitlines()]
    other.write_text("".join(json.dumps({**r, "machine_fingerprint": "0000"}) + "\n" for r in rows))
    result = orchard("compare", old, other, cwd=lab)
    assert result.returncode == 2 and "machine_fingerprint" in result.stderr
    both = orchard(
        "bench",
        "run",
        "--suite",
        "suite.toml",
        "--subject",
        "a=fast",
        "--subject",
        "b=slow",
        "--runs",
        "6",
        "--results",
        "both",
        cwd=lab,
    )
    assert both.returncode == 0
    mixed = next((lab / "both" / "bench").glob("*.jsonl"))
    result = orchard("compare", old, mixed, cwd=lab)
    assert result.returncode == 2 and "several subjects" in result.stderr
