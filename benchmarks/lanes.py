"""Measure the version-control lanes on this machine and print the evidence tables.

    python benchmarks/lanes.py --results /tmp/lanes-evidence [--measure] [--runs 5]

With --measure it first runs `orchard bench task-loop` (local and daemon
transports) and `orchard bench contention --workers 2,8,32` into --results;
without it, it only summarizes the newest runs already there. Output:
Markdown for docs/benchmarks.md (machine, date, run counts, medians).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchard.bench.machine import machine_facts, machine_fingerprint
from orchard.bench.results.store import run_files
from orchard.jsonlines import read_jsonl


def orchard(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "orchard", *args], check=False)


def measure(results: Path, runs: int, contention_runs: int) -> None:
    scenarios = "task_loop,agent_task_baseline_v1,interrupted_publication_after_request_v1"
    orchard("bench", "task-loop", "--subjects", "git,oak", "--runs", str(runs), "--git-remote", "local",
            "--scenarios", scenarios, "--results", str(results / "local"))
    orchard("bench", "task-loop", "--subjects", "git", "--runs", str(runs), "--git-remote", "daemon",
            "--scenarios", "task_loop,agent_task_baseline_v1", "--results", str(results / "daemon"))
    orchard("bench", "contention", "--workers", "2,8,32", "--commits", "5", "--runs", str(contention_runs),
            "--results", str(results / "contention"))


def newest(results: Path, lane: str) -> list[dict[str, Any]]:
    found: list[Path] = []
    for folder in sorted(p for p in results.iterdir() if p.is_dir()):
        found += run_files(folder, lane)
    return read_jsonl(sorted(found, key=lambda p: p.name)[-1]) if found else []


def spread(values: Sequence[float]) -> str:
    if not values:
        return "unmeasured"
    return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"


def table(headers: Sequence[str], body: Iterable[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in body]


def task_loop_tables(rows: list[dict[str, Any]]) -> list[str]:
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row.get("step_kind") == "total":
            groups[(row["scenario"], row["subject"], str(row.get("remote_transport")))].append(row)
    body = []
    for (scenario, subject, transport), totals in sorted(groups.items()):
        def values(field: str, totals: list[dict[str, Any]] = totals) -> list[float]:
            return [float(t[field]) for t in totals if t.get(field) is not None]

        passed = sum(1 for t in totals if t.get("returncode") == 0)
        body.append(
            (
                scenario, f"`{subject}`", transport, len(totals), spread(values("elapsed_ms")),
                spread(values("tool_call_count")), spread(values("estimated_total_tokens")),
                spread(values("followup_warm_delta_ms")) if scenario == "task_loop" else "n/a",
                spread(values("network_bytes")) if transport != "local_file" else "not observed",
                f"{passed}/{len(totals)}",
            )
        )
    return table(
        ("Scenario", "Subject", "Transport", "Runs", "Wall ms median (min-max)", "Tool calls", "Est. tokens",
         "Warm delta ms", "Network bytes", "Passed"),
        body,
    )


def contention_table(rows: list[dict[str, Any]]) -> list[str]:
    groups: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row.get("operation") == "contention.total":
            groups[(row["mode"], int(row["workers"]))].append(row)
    body = []
    for (mode, workers), totals in sorted(groups.items()):
        sps = [float(t["snapshots_per_second"]) for t in totals if t.get("snapshots_per_second")]
        body.append(
            (
                mode, workers, totals[0]["commits_per_worker"], len(totals),
                spread([float(t["elapsed_ms"]) for t in totals]),
                f"{statistics.median(sps):.1f} ({min(sps):.1f}-{max(sps):.1f})" if sps else "unmeasured",
                spread([float(t["retry_count"]) for t in totals]),
                sum(int(t.get("lost_updates") or 0) for t in totals),
                "yes" if all(t.get("fsck_clean") for t in totals) else "NO",
                f"{sum(1 for t in totals if t.get('returncode') == 0)}/{len(totals)}",
            )
        )
    return table(
        ("Mode", "Workers", "Commits/worker", "Runs", "Wall ms median (min-max)", "Snapshots/s median (min-max)",
         "Retries median (min-max)", "Lost updates (all runs)", "fsck clean", "Passed"),
        body,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--measure", action="store_true")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--contention-runs", type=int, default=3)
    args = parser.parse_args()
    if args.measure:
        measure(args.results, args.runs, args.contention_runs)
    facts = machine_facts()
    task_rows: list[dict[str, Any]] = []
    for folder in ("local", "daemon"):
        path = args.results / folder
        if path.is_dir() and run_files(path, "task-loop"):
            task_rows += read_jsonl(run_files(path, "task-loop")[-1])
    lines = [
        f"Measured {datetime.now(UTC).date()} on {facts.describe()} "
        f"(fingerprint `{machine_fingerprint()}`).",
        "",
        "### Task loop (git)",
        "",
        *task_loop_tables(task_rows),
        "",
        "### Contention (git)",
        "",
        *contention_table(newest(args.results, "contention")),
    ]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
