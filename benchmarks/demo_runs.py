"""Where a demo lab's measurement time went: measured runs per verdict and scenario, time inside them and between.

Reads the rows a lab wrote under `results/` (the A/A calibration's and every verdict's), so it profiles any
finished demo workspace, however it was run. Prints one line per verdict (its candidate's judge directory, its
word, pairs judged and measured runs per scenario), then the totals: runs, seconds inside runs (the rows'
monotonic start to end: the sandbox's set-up and the program), and the gaps between consecutive runs of one
pair under the lock (orchard's own work between runs) apart from longer gaps (another campaign's turn, a
build, waits).

    .venv/bin/python benchmarks/demo_runs.py DEMO_WORKSPACE
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from orchard.jsonlines import read_jsonl

SHORT_GAP_S = 0.2  # a gap at most this long is the runner's own between two runs of one pair


def _candidate(path: Path, rows: list[dict[str, Any]]) -> str:
    binary = next((str(r["binary"]) for r in rows if r.get("role") == "candidate"), "")
    name = binary.split("/judge/")[1].split("/")[0] if "/judge/" in binary else binary
    return f"A/A calibration of {name}" if path.parent.name == "calibrate" else name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workspace", type=Path)
    root = parser.parse_args().workspace
    measured: list[dict[str, Any]] = []
    for path in sorted((root / "results").glob("*/*.jsonl")):
        rows = read_jsonl(path)
        runs = [r for r in rows if r.get("step_kind") == "measured"]
        verdict = next((r for r in rows if r.get("step_kind") == "verdict"), {})
        per = Counter(str(r["scenario"]) for r in runs)
        print(f"{_candidate(path, runs):32} {verdict.get('verdict', '-'):13} pairs {verdict.get('pairs', '-')!s:>3}  "
              + " ".join(f"{name} {count}" for name, count in sorted(per.items())))
        measured += runs
    measured.sort(key=lambda r: int(r["monotonic_start_ns"]))
    inside = [(int(r["monotonic_end_ns"]) - int(r["monotonic_start_ns"])) / 1e9 for r in measured]
    gaps = [(int(b["monotonic_start_ns"]) - int(a["monotonic_end_ns"])) / 1e9
            for a, b in zip(measured, measured[1:], strict=False)]
    short = [gap for gap in gaps if gap <= SHORT_GAP_S]
    print(f"\n{len(measured)} measured runs: " + ", ".join(
        f"{name} {count}" for name, count in sorted(Counter(str(r["scenario"]) for r in measured).items())))
    print(f"inside runs {sum(inside):.1f} s (median {statistics.median(inside) * 1000:.0f} ms a run); "
          f"between runs of a pair {sum(short):.1f} s (median {statistics.median(short) * 1000:.0f} ms, {len(short)}); "
          f"longer gaps {sum(gaps) - sum(short):.1f} s; first run to last {sum(inside) + sum(gaps):.1f} s")


if __name__ == "__main__":
    main()
