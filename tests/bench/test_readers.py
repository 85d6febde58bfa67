"""Readers of other tools' result files, on real output of the real tools (generated here)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchard.bench.suites import readers
from orchard.bench.suites.readers import Format
from orchard.errors import UsageError
from tests.helpers import make_binary, orchard

DATA = Path(__file__).parent / "data"
needs_hyperfine = pytest.mark.skipif(
    shutil.which("hyperfine") is None, reason="hyperfine (Debian package) not installed"
)


@needs_hyperfine
def test_hyperfine_export_json_gives_one_row_per_run(tmp_path: Path) -> None:
    out = tmp_path / "hyperfine.json"
    subprocess.run(
        [
            "hyperfine",
            "--runs",
            "4",
            "--warmup",
            "1",
            "-N",
            "--style",
            "none",
            "--export-json",
            str(out),
            "true",
            "sleep 0.02",
        ],
        check=True,
        capture_output=True,
    )
    rows = readers.read(out.read_text(), Format.HYPERFINE, str(out))
    assert [r["benchmark"] for r in rows] == ["true"] * 4 + ["sleep 0.02"] * 4
    assert all(r["returncode"] == 0 for r in rows)
    assert min(r["wall_ms"] for r in rows if r["benchmark"] == "sleep 0.02") >= 20.0


def test_pyperf_output_gives_one_row_per_value(tmp_path: Path) -> None:
    out = tmp_path / "pyperf.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pyperf",
            "timeit",
            "--quiet",
            "--processes",
            "2",
            "--values",
            "3",
            "--loops",
            "10",
            "--name",
            "sum100",
            "-o",
            str(out),
            "sum(range(100))",
        ],
        check=True,
        capture_output=True,
    )
    rows = readers.read(out.read_text(), Format.PYPERF, str(out))
    assert len(rows) == 6 and {r["benchmark"] for r in rows} == {"sum100"}
    assert all(0 < r["wall_ms"] < 1 and r["unit"] == "second" for r in rows)


@pytest.mark.slow
def test_pytest_benchmark_json_gives_one_row_per_sample(tmp_path: Path) -> None:
    (tmp_path / "test_work.py").write_text(
        "def test_sort(benchmark):\n    benchmark(sorted, list(range(1000, 0, -1)))\n"
    )
    out = tmp_path / "pytest-benchmark.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "test_work.py",
            f"--benchmark-json={out}",
            "--benchmark-save-data",
            "--benchmark-min-rounds=5",
            "--benchmark-max-time=0.05",
        ],
        cwd=tmp_path,
        # not this run's pytest-xdist worker variables (pytest-benchmark would switch itself off), nor
        # `make test`'s plugin autoload switch (pytest-benchmark is loaded by it)
        env={name: value for name, value in os.environ.items()
             if not name.startswith("PYTEST_XDIST") and name != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"},
        check=True,
        capture_output=True,
    )
    rows = readers.read(out.read_text(), Format.PYTEST_BENCHMARK, str(out))
    assert len(rows) >= 5 and {r["benchmark"] for r in rows} == {"test_work.py::test_sort"}
    assert all(r["wall_ms"] > 0 for r in rows)


def test_google_benchmark_json_keeps_iterations_not_aggregates() -> None:
    path = DATA / "google-benchmark.json"
    rows = readers.read(path.read_text(), Format.GOOGLE_BENCHMARK, str(path))
    assert [r["benchmark"] for r in rows] == ["BM_Tokenize/1024"] * 3 + ["BM_Count/4096"]
    assert rows[0]["wall_ms"] == pytest.approx(0.026932, rel=1e-4)  # 26932 ns
    assert rows[3]["cpu_ms"] == pytest.approx(0.52092, rel=1e-4)  # 520.9 us


def test_google_benchmark_json_with_aggregates_only_says_so() -> None:
    data = json.loads((DATA / "google-benchmark.json").read_text())
    data["benchmarks"] = [b for b in data["benchmarks"] if b["run_type"] == "aggregate"]
    assert data["benchmarks"], "the sample file has aggregate rows"
    with pytest.raises(UsageError, match=r"gb\.json: .*only aggregate rows .*--benchmark_report_aggregates_only"):
        readers.read(json.dumps(data), Format.GOOGLE_BENCHMARK, "gb.json")


def test_each_tools_file_is_recognised_and_orchard_rows_are_not_taken_for_one() -> None:
    assert readers.sniff((DATA / "google-benchmark.json").read_text()) == Format.GOOGLE_BENCHMARK
    assert readers.sniff('{"results": [{"command": "true", "times": [0.1]}]}') == Format.HYPERFINE
    assert readers.sniff('{"machine_info": {}, "benchmarks": []}') == Format.PYTEST_BENCHMARK
    assert readers.sniff('{"version": "1.0", "benchmarks": []}') == Format.PYPERF
    assert readers.sniff('{"step_kind": "measured", "scenario": "s"}\n') is None


@pytest.mark.parametrize("fmt", list(Format))
# a multi-line JSON document from some other tool (hyperfine's export silently gave zero jsonl rows)
@pytest.mark.parametrize("text", ["", '{\n  "something": "else",\n  "results": []\n}\n'])
def test_an_empty_or_foreign_file_is_an_error_naming_it(fmt: Format, text: str) -> None:
    with pytest.raises(UsageError, match=r"results\.json: (no .* results found|cannot read it)"):
        readers.read(text, fmt, "results.json")


HYPERFINE_SUITE = """
[suite]
name = "hyperfine"
runs = 6
min_runs = 6
calibration_runs = 6

[[scenario]]
name = "startup"
kind = "rows"
command = ["hyperfine", "--runs", "3", "-N", "--style", "none", "--export-json", "{workdir}/h.json", "{bin}"]
format = "hyperfine"
file = "{workdir}/h.json"
aggregate = "mean"

[[metric]]
name = "wall_ms"
"""


@needs_hyperfine
def test_a_suite_reads_hyperfine_results_through_bench_run(tmp_path: Path) -> None:
    make_binary(tmp_path, "tool", iterations=100)
    (tmp_path / "suite.toml").write_text(HYPERFINE_SUITE)
    result = orchard("bench", "run", "--suite", "suite.toml", "--subject", "tool=tool", "--runs", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows_file = next((tmp_path / "results" / "bench").glob("*.jsonl"))
    measured = [json.loads(line) for line in rows_file.read_text().splitlines()]
    assert len(measured) == 2 and all(len(r["harness_rows"]) == 3 for r in measured)
    assert all(r["harness_rows"][0]["wall_ms"] > 0 for r in measured)


def test_a_harness_that_writes_no_rows_exits_2_naming_the_file(tmp_path: Path) -> None:
    make_binary(tmp_path, "tool", iterations=10)
    suite = HYPERFINE_SUITE.replace(
        'command = ["hyperfine", "--runs", "3", "-N", "--style", "none", "--export-json", "{workdir}/h.json", "{bin}"]',
        'command = "echo {{}} > {workdir}/h.json"',
    )
    (tmp_path / "suite.toml").write_text(suite)
    result = orchard("bench", "run", "--suite", "suite.toml", "--subject", "tool=tool", "--runs", "1", cwd=tmp_path)
    assert result.returncode == 2
    assert "results file" in result.stderr and "h.json" in result.stderr and "no hyperfine results" in result.stderr


@pytest.mark.slow
def test_a_candidate_whose_harness_yields_nothing_fails_its_run_and_is_regressed(tmp_path: Path) -> None:
    (tmp_path / "base").write_text("#!/bin/sh\necho '{\"score\": 1}'\n")
    (tmp_path / "mute").write_text("#!/bin/sh\nexit 0\n")
    for name in ("base", "mute"):
        (tmp_path / name).chmod(0o755)
    (tmp_path / "suite.toml").write_text(
        '[suite]\nruns = 6\nmin_runs = 6\ncalibration_runs = 6\n\n[[scenario]]\nname = "s"\nkind = "rows"\n'
        'command = ["{bin}"]\n\n[[metric]]\nname = "score"\n'
    )
    result = orchard(
        "verdict", "--suite", "suite.toml", "--baseline", "base", "--candidate", "mute", "--json", cwd=tmp_path
    )
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["verdict"] == "REGRESSED"
    assert any("no jsonl results found" in reason for reason in report["reasons"]), report["reasons"]
    swapped = orchard("verdict", "--suite", "suite.toml", "--baseline", "mute", "--candidate", "base", cwd=tmp_path)
    assert swapped.returncode == 2 and "stdout" in swapped.stderr and "no jsonl results found" in swapped.stderr
