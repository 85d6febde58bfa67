"""`orchard compare OLD.jsonl NEW.jsonl`: two stored result sets judged without measuring again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import make_binary, make_suite, orchard


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
def test_runs_that_line_up_are_compared_paired(lab: Path) -> None:
    old = _bench_run(lab, "fast", 8, "old")
    new = _bench_run(lab, "slow", 8, "new")
    result = orchard("compare", old, new, "--json", cwd=lab)
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["schema"] == "orchard.compare/1" and report["paired"] is True and report["warnings"] == []
    assert report["verdict"] == "REGRESSED"
    by_metric = {m["metric"]: m for m in report["metrics"]}
    assert by_metric["cpu_ms"]["verdict"] == "regressed" and by_metric["cpu_ms"]["effect_percent"] > 30
    assert (by_metric["stdout_bytes"]["method"], by_metric["stdout_bytes"]["verdict"]) == ("exact", "no-change")
    same = orchard("compare", old, old, cwd=lab)
    assert same.returncode == 0 and "paired comparison" in same.stdout


def test_runs_that_do_not_line_up_are_compared_unpaired_with_a_warning(lab: Path) -> None:
    old = _bench_run(lab, "fast", 8, "old")
    new = _bench_run(lab, "slow", 6, "new")
    report = json.loads(orchard("compare", old, new, "--json", cwd=lab).stdout)
    assert report["paired"] is False
    assert any("do not line up" in w and "compared unpaired" in w for w in report["warnings"])
    cpu = next(m for m in report["metrics"] if m["metric"] == "cpu_ms")
    assert cpu["method"] == "hodges-lehmann-unpaired" and cpu["verdict"] == "regressed"
    text = orchard("compare", old, new, cwd=lab)
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
