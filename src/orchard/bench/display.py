"""How verdicts and runs are shown: terminal table, JSON, Markdown summary.

The terminal and JSON forms carry the same fields, one line (or object) per
metric: verdict, effect, interval, floor, n, minimum detectable effect and
both medians, so nothing a reader sees on screen is missing from `--json`.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from orchard.bench.calibration import Calibration, age_text
from orchard.bench.verdict import CalibrationNote, MetricResult, MetricVerdict, Verdict, VerdictWord

_STYLE = {MetricVerdict.IMPROVED: "green", MetricVerdict.REGRESSED: "red", MetricVerdict.UNCHANGED: "dim",
          MetricVerdict.UNCLEAR: "yellow"}
_OVERALL_STYLE = {VerdictWord.PASS: "bold green", VerdictWord.REGRESSED: "bold red", VerdictWord.NO_CHANGE: "bold",
                  VerdictWord.INCONCLUSIVE: "bold yellow", VerdictWord.ERROR: "bold red"}


def pct(value: float | None, signed: bool = True) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:+.2%}" if signed else f"{value:.2%}"


def quantity(value: float | None, metric: str) -> str:
    if value is None:
        return "-"
    if metric.endswith("_ms"):
        return f"{value:.2f} ms"
    if metric.endswith("_bytes"):
        return f"{value / 1e6:.2f} MB" if value >= 1e6 else f"{value:.0f} B"
    return f"{value:g}"


def interval_text(metric: MetricResult) -> str:
    if metric.interval is None:
        return "-"
    low, high = metric.interval
    return f"[{pct(low)}, {pct(high)}]"


def metric_table(metrics: Sequence[MetricResult], title: str | None = None) -> Table:
    table = Table(title=title, show_edge=False, header_style="bold")
    for column in ("metric", "verdict", "effect", "interval", "floor", "n", "MDE", "baseline", "candidate"):
        table.add_column(column, justify="left" if column in ("metric", "verdict") else "right", no_wrap=True)
    for m in metrics:
        table.add_row(
            m.key,
            f"[{_STYLE.get(m.verdict, '')}]{m.verdict}[/]",
            pct(m.effect),
            interval_text(m) + (f" @{m.confidence:.0%}" if m.confidence and m.method != "exact" else " exact"),
            pct(m.floor, signed=False),
            str(m.n),
            pct(m.mde, signed=False),
            quantity(m.baseline_median, m.metric),
            quantity(m.candidate_median, m.metric),
        )
    return table


def calibration_line(cal: CalibrationNote | None) -> str:
    if cal is None:
        return "calibration: none"
    source = "cached" if cal.cached else "fresh"
    return f"calibration: {source}, {age_text(cal.age_s)} old, {cal.runs} A/A pairs, machine {cal.machine_fingerprint}"


def print_verdict(console: Console, verdict: Verdict) -> None:
    console.print(calibration_line(verdict.calibration))
    console.print(f"pair order seed: {verdict.seed}; pairs judged: {verdict.pairs} of up to {verdict.planned_pairs}")
    if verdict.metrics:
        console.print(metric_table(verdict.metrics))
    for gate in verdict.gates:
        mark = "[green]pass[/]" if gate.passed else "[red]FAIL[/]"
        console.print(f"gate {gate.name}: {mark} {gate.detail}")
    for warning in verdict.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
    style = _OVERALL_STYLE.get(verdict.verdict, "bold")
    console.print(f"verdict: [{style}]{verdict.verdict}[/]")
    for reason in verdict.reasons:
        console.print(f"  - {reason}")
    console.print(f"rows: {verdict.rows}")


def calibration_table(cal: Calibration) -> Table:
    table = Table(show_edge=False, header_style="bold")
    for column in ("metric", "kind", "median", "floor", "A/A estimate", "A/A interval (99%)", "robust sd", "n"):
        table.add_column(column, justify="left" if column in ("metric", "kind") else "right")
    for key, m in cal.metrics.items():
        table.add_row(
            key,
            "deterministic" if m.deterministic else "stochastic",
            quantity(m.median, key.rsplit("/", 1)[-1]),
            pct(m.floor, signed=False),
            pct(m.estimate),
            f"[{pct(m.interval[0])}, {pct(m.interval[1])}]",
            f"{m.sd:.4f}",
            str(m.n),
        )
    return table


def rows_summary(rows: Sequence[Mapping[str, Any]]) -> str:
    """Markdown summary written beside a suite lane's JSONL: medians per scenario and subject."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    verdicts = [row for row in rows if row.get("step_kind") == "verdict"]
    for row in rows:
        if row.get("step_kind") == "measured" and not row.get("warmup"):
            groups[(str(row.get("scenario")), str(row.get("role") or row.get("subject")))].append(row)
    lines = ["# Measurement summary", ""]
    if rows:
        first = rows[0]
        lines.append(
            f"Suite `{first.get('suite')}`, lane `{first.get('lane')}`, seed {first.get('seed')}, "
            f"machine `{first.get('machine_fingerprint')}`."
        )
        lines.append("")
    lines += [
        "| Scenario | Subject | Runs | Failures | Median wall ms | Median CPU ms | Median stdout bytes | Est. tokens |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for (scenario, subject), group in sorted(groups.items()):
        lines.append(
            f"| {scenario} | {subject} | {len(group)} | {sum(1 for r in group if r.get('returncode') != 0)} | "
            f"{_median(group, 'elapsed_ms')} | {_median(group, 'cpu_ms')} | {_median(group, 'stdout_bytes')} | "
            f"{_median(group, 'estimated_total_tokens')} |"
        )
    for row in verdicts:
        lines += ["", f"**Verdict: {row.get('verdict')}** after {row.get('pairs')} pairs."]
        lines += [f"- {reason}" for reason in row.get("reasons") or []]
    return "\n".join(lines) + "\n"


def _median(rows: Sequence[Mapping[str, Any]], field: str) -> str:
    values = [float(r[field]) for r in rows if r.get(field) is not None]
    return f"{statistics.median(values):.2f}" if values else "unmeasured"
