"""Measure the core lane (and the task loop's warm-up) on this machine; print the evidence tables.

    python benchmarks/core_lane.py --results /tmp/core-evidence --cache /tmp/core-cache [--measure]

With --measure it first builds the generated repositories into a fresh --cache
(timing each build), then runs `orchard bench core --subjects git --files
1000,10000,50000 --runs 5` (plus the large-binary repository), a second
`orchard bench core` on the now warm cache, and `orchard bench task-loop
--subjects git --runs 5`; the load average is recorded before and after.
Without it, it only summarizes the newest runs already under --results.
Output: Markdown for docs/benchmarks-lanes.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchard.bench.lanes.core import BINARIES
from orchard.bench.lanes.generated_repo import RepoSpec, ensure
from orchard.bench.machine import machine_facts, machine_fingerprint
from orchard.bench.results.store import run_files
from orchard.bench.sandbox.environment import isolated_env
from orchard.jsonlines import read_jsonl

FILES = (1_000, 10_000, 50_000)
STEPS = ("status", "diff", "log", "show")


def orchard(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "orchard", *args], check=False, stdout=subprocess.DEVNULL)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


def measure(results: Path, cache: Path, runs: int) -> dict[str, Any]:
    notes: dict[str, Any] = {"load_before": load(), "builds": {}}
    specs = [RepoSpec(files) for files in FILES] + [RepoSpec(FILES[0], binaries=BINARIES[0], binary_mib=BINARIES[1])]
    for spec in specs:
        started = time.perf_counter()
        fixture = ensure(spec, cache, "git", isolated_env())
        notes["builds"][spec.label] = {"seconds": round(time.perf_counter() - started, 1), "built": fixture.built}
    files = ",".join(str(n) for n in FILES)
    for attempt in ("first", "second"):
        started = time.perf_counter()
        orchard("bench", "core", "--subjects", "git", "--files", files, "--runs", str(runs),
                "--cache", str(cache), "--results", str(results / f"core-{attempt}"))
        notes[f"core_{attempt}_seconds"] = round(time.perf_counter() - started, 1)
    orchard("bench", "task-loop", "--subjects", "git", "--runs", str(runs), "--results", str(results / "task-loop"))
    notes["load_after"] = load()
    (results / "notes.json").write_text(json.dumps(notes, indent=2) + "\n")
    return notes


def spread(values: Sequence[float], digits: int = 0) -> str:
    if not values:
        return "unmeasured"
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def table(headers: Sequence[str], body: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in body]


def newest(folder: Path, lane: str) -> list[dict[str, Any]]:
    files = run_files(folder, lane) if folder.is_dir() else []
    return read_jsonl(files[-1]) if files else []


def core_tables(rows: list[dict[str, Any]]) -> list[str]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row.get("operation") == "core.total" and not row.get("warmup") and row.get("information_recall") is not None:
            groups[str(row["fixture_label"])].append(row)
    order = sorted(groups, key=lambda label: (groups[label][0]["binaries"], groups[label][0]["files"]))
    body = []
    for label in order:
        totals = groups[label]
        body.append(
            (
                label, len(totals),
                *(spread([float(t[f"{step}_ms"]) for t in totals], 1) for step in STEPS),
                spread([float(t["elapsed_ms"]) for t in totals], 1),
                spread([float(t["output_bytes"]) for t in totals]),
                spread([float(t["estimated_total_tokens"]) for t in totals]),
                f"{min(t['information_recall'] for t in totals):g}",
                "yes" if all(t["pipe_compatible_unified"] for t in totals) else "NO",
                "yes" if all(t["determinism"] for t in totals) else "NO",
                f"{sum(t['returncode'] == 0 for t in totals)}/{len(totals)}",
            )
        )
    lines = table(
        ("Repository", "Runs", *(f"{step} ms" for step in STEPS), "Total ms", "Output bytes", "Est. tokens",
         "Recall (min)", "Pipe", "Deterministic", "Passed"),
        body,
    )
    text = [groups[label] for label in order if not groups[label][0]["binaries"]]
    if len(text) >= 2:
        small, large = text[0], text[-1]
        growth = []
        for step in (*STEPS, "elapsed"):
            field = "elapsed_ms" if step == "elapsed" else f"{step}_ms"
            a = statistics.median(float(t[field]) for t in small)
            b = statistics.median(float(t[field]) for t in large)
            growth.append((step if step != "elapsed" else "total", f"{a:.1f}", f"{b:.1f}", f"{b / a:.1f}x"))
        files = f"{small[0]['files']:,} -> {large[0]['files']:,} files ({large[0]['files'] / small[0]['files']:.0f}x)"
        lines += ["", f"Growth, median ms, {files}:", ""]
        lines += table(("Command", f"{small[0]['files']:,} files", f"{large[0]['files']:,} files", "Ratio"), growth)
    return lines


def warmup_table(rows: list[dict[str, Any]]) -> list[str]:
    totals = [r for r in rows if r.get("operation") == "task_loop.total"]
    warm = [float(r["elapsed_ms"]) for r in totals if r.get("warmup")]
    measured = [float(r["elapsed_ms"]) for r in totals if not r.get("warmup")]
    return table(
        ("Task loop (git, local_file)", "Runs", "Wall ms median (min-max)"),
        [
            ("warm-up (recorded, not summarized)", len(warm), spread(warm)),
            ("measured runs", len(measured), spread(measured)),
        ],
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--measure", action="store_true")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if args.measure:
        args.results.mkdir(parents=True, exist_ok=True)
        measure(args.results, args.cache, args.runs)
    notes = json.loads((args.results / "notes.json").read_text()) if (args.results / "notes.json").is_file() else {}
    facts = machine_facts()
    builds = notes.get("builds", {})
    lines = [
        (
            f"Measured {datetime.now(UTC).date()} on `{facts['hostname']}`: {facts['cpu_model']}, "
            f"{facts['cpu_count']} cores, {(facts['memory_bytes'] or 0) / 2**30:.1f} GiB, Linux {facts['kernel']}, "
            f"Python {facts['python']} (fingerprint `{machine_fingerprint()}`). Load average (1/5/15 min) "
            f"before {notes.get('load_before', '?')}, after {notes.get('load_after', '?')}."
        ),
        "",
        "### Core lane (git), first campaign",
        "",
        *core_tables(newest(args.results / "core-first", "core")),
        "",
        "### Core lane (git), second campaign on the cached repositories",
        "",
        *core_tables(newest(args.results / "core-second", "core")),
        "",
        (
            "Repository builds (once; later campaigns reuse the cache): "
            + ", ".join(f"{label} {b['seconds']} s" for label, b in builds.items())
            + f". Whole campaigns: first {notes.get('core_first_seconds', '?')} s,"
            + f" second {notes.get('core_second_seconds', '?')} s."
        ),
        "",
        "### Task loop warm-up",
        "",
        *warmup_table(newest(args.results / "task-loop", "task-loop")),
    ]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
