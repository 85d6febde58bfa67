"""`orchard bench run` prints a terminal table, each median in its metric's unit (issue 33 item 6: it printed
raw Markdown, and bytes as `11.00`); the Markdown summary beside the rows carries the units too."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import make_binary, make_suite, orchard


def test_bench_run_prints_a_table_with_units(tmp_path: Path) -> None:
    make_binary(tmp_path, "fast", iterations=100)
    make_suite(tmp_path, runs=8, calibration_runs=8)
    done = orchard("bench", "run", "--suite", "suite.toml", "--subject", "fast=fast", "--runs", "3", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(line for line in lines if "scenario" in line)
    assert header.replace("┃", " ").split() == ["scenario", "subject", "runs", "failures", "wall_ms", "cpu_ms",
                                                "stdout_bytes"], done.stdout
    (row,) = [line for line in lines if "│" in line]
    cells = [cell.strip() for cell in row.split("│")]
    assert cells[:4] == ["loop", "fast", "3", "0"], cells
    assert cells[4].endswith("s") and cells[5].endswith("s") and cells[6] == "24 B", cells  # ms or µs; bytes
    assert not any(line.startswith("|") for line in lines), done.stdout  # no raw Markdown
    assert lines[-1].startswith("rows: ") and lines[-1].endswith(".jsonl")
    summary = next((tmp_path / "results" / "bench").glob("*.md")).read_text()
    assert "| loop | fast | 3 | 0 |" in summary and "| 24 B |" in summary, summary
