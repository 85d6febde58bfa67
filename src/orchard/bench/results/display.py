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
from dataclasses import asdict, dataclass
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from orchard.bench.deciding.calibration import Calibration, age_text
from orchard.bench.deciding.spread import Spread
from orchard.bench.deciding.verdict import (
    CalibrationNote,
    Method,
    MetricResult,
    MetricVerdict,
    Scale,
    Verdict,
    VerdictDecision,
    VerdictWord,
)
from orchard.bench.results.row_metrics import readings
from orchard.bench.results.store import RunWriter
from orchard.bench.suites.suite import Suite
from orchard.fitted import Fitted
from orchard.units import quantity, times

RUN_SCHEMA = "orchard.bench-run/1"
_STYLE = {MetricVerdict.IMPROVED: "green", MetricVerdict.REGRESSED: "red", MetricVerdict.UNCHANGED: "dim",
          MetricVerdict.UNCLEAR: "yellow"}
_OVERALL_STYLE = {VerdictWord.PASS: "bold green", VerdictWord.REGRESSED: "bold red", VerdictWord.NO_CHANGE: "bold",
                  VerdictWord.INCONCLUSIVE: "bold yellow", VerdictWord.ERROR: "bold red"}


def pct(value: float | None, signed: bool = True) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:+.2%}" if signed else f"{value:.2%}"


NO_INTERVAL = "no interval at this n"


def ratio(metric: MetricResult) -> float | None:
    """Candidate over baseline, from the effect; None where the effect is no ratio (the baseline's median is 0)."""
    if metric.effect is None or not math.isfinite(metric.effect) or metric.scale == Scale.ABSOLUTE:
        return None
    return 1.0 + metric.effect


def effect_text(metric: MetricResult) -> str:
    """`-46.52% (1.87x faster)`: the percentage and, as hyperfine says it, the ratio."""
    shown = times(ratio(metric), metric.metric)
    return pct(metric.effect) if shown == "-" else f"{pct(metric.effect)} ({shown})"


def interval_text(metric: MetricResult) -> str:
    """The interval, or why there is none (too few pairs for its confidence level)."""
    if metric.interval is None:
        return "-"
    return bounds_text(*metric.interval)


def bounds_text(low: float, high: float) -> str:
    """Relative bounds; an unbounded side (-100% is log(0)) means n is too small for this level."""
    if not (math.isfinite(low) and math.isfinite(high)) or low <= -1.0:
        return NO_INTERVAL
    return f"[{pct(low)}, {pct(high)}]"


def confidence_text(metric: MetricResult) -> str:
    """What the interval is, in words: `99% confidence`, `exact`, `counted 3x per binary` (empty: no interval)."""
    if metric.method == Method.EXACT:
        return "exact"
    if metric.method == Method.COUNTED:
        return f"counted {metric.n}x per binary"
    if metric.confidence and interval_text(metric) != NO_INTERVAL:
        return f"{metric.confidence:.0%} confidence"
    return ""


def metric_table(metrics: Sequence[MetricResult], title: str | None = None) -> Table:
    table = Table(title=title, show_edge=False, header_style="bold")
    for column in ("metric", "verdict", "effect", "interval", "floor", "n", "MDE", "baseline", "candidate"):
        table.add_column(column, justify="left" if column in ("metric", "verdict") else "right", no_wrap=True)
    for m in metrics:
        table.add_row(
            m.key,
            f"[{_STYLE.get(m.verdict, '')}]{m.verdict}[/]",
            f"{pct(m.effect)}\n{times(ratio(m), m.metric)}",
            "\n".join(filter(None, (interval_text(m), confidence_text(m)))),
            pct(m.floor, signed=False),
            str(m.n),
            pct(m.mde, signed=False),
            quantity(m.baseline_median, m.metric),
            quantity(m.candidate_median, m.metric),
        )
    return table


def metric_block(m: MetricResult) -> Text:
    """One metric as a few short lines: the stacked form of its table row, for a console too narrow for the table."""
    style = _STYLE.get(m.verdict, "")
    block = Text.assemble((m.key, "bold"), "  ", (str(m.verdict), style))
    label = f" ({confidence_text(m)})" if confidence_text(m) else ""
    block.append(f"\n  effect {effect_text(m)}, interval {interval_text(m)}{label}")
    block.append(f"\n  floor {pct(m.floor, signed=False)}, n {m.n}, MDE {pct(m.mde, signed=False)}")
    if m.baseline_spread is None or m.candidate_spread is None:
        block.append(f"\n  baseline {quantity(m.baseline_median, m.metric)}, "
                     f"candidate {quantity(m.candidate_median, m.metric)}")
        return block
    for side, median, spread in _sides(m):
        if spread is not None:
            block.append(f"\n  {side} median {quantity(median, m.metric)}, mean ± σ {spread.mean_text(m.metric)},"
                         f"\n    min … max {spread.range_text(m.metric)}")
    return block


def _sides(m: MetricResult) -> tuple[tuple[str, float | None, Spread | None], ...]:
    return (("baseline", m.baseline_median, m.baseline_spread), ("candidate", m.candidate_median, m.candidate_spread))


def spread_table(metrics: Sequence[MetricResult]) -> Table:
    """Each side's runs as hyperfine and pyperf users read them first, beside the median the verdict judges."""
    table = Table(show_edge=False, header_style="bold")
    for column in ("metric", "side", "median", "mean ± σ", "min … max"):
        table.add_column(column, justify="left" if column in ("metric", "side") else "right", no_wrap=True)
    for m in metrics:
        for side, median, spread in _sides(m):
            if spread is not None:
                table.add_row(m.key, side, quantity(median, m.metric), spread.mean_text(m.metric),
                              spread.range_text(m.metric))
    return table


def print_metrics(console: Console, metrics: Sequence[MetricResult]) -> None:
    """The metric table and the spreads' when they fit the console's width, else one block per metric."""
    tables = [metric_table(metrics)]
    if any(m.baseline_spread or m.candidate_spread for m in metrics):
        tables.append(spread_table(metrics))
    console.print(Fitted(tables, [metric_block(m) for m in metrics]))


def calibration_line(cal: CalibrationNote | None) -> str:
    if cal is None:
        return "calibration: none"
    source = "cached" if cal.cached else "fresh"
    where = "" if cal.file is None else f", file {cal.file}"
    return (f"calibration: {source}, {age_text(cal.age_s)} old, {cal.runs} A/A pairs, "
            f"machine {cal.machine_fingerprint}{where}")


def print_verdict(console: Console, verdict: Verdict) -> None:
    if verdict.seed is not None:  # a campaign ran (identical programs are judged without one)
        console.print(calibration_line(verdict.calibration), markup=False)
        if verdict.confinement:
            console.print(verdict.confinement, markup=False)
        console.print(f"pair order seed: {verdict.seed}; pairs judged: {verdict.pairs} of up to "
                      f"{verdict.planned_pairs}" + early_scenarios(verdict), markup=False)
    if verdict.variants is not None:
        console.print(verdict.variants.line(), markup=False)
    print_decision(console, as_decision(verdict), verdict.warnings)
    for advice in verdict.advice:  # one line each, never wrapped: what to measure instead of a noisy timing metric
        console.print(f"[yellow]advice:[/] {escape(advice.line())}", soft_wrap=True)
    console.print(f"rows: {verdict.rows}", markup=False)


def early_scenarios(verdict: Verdict) -> str:
    """The scenarios decided exactly before the campaign ended, and not run after (their metrics' n says when)."""
    pairs = verdict.pairs or 0
    early = {m.scenario: m.n for m in verdict.metrics if m.method == Method.EXACT and m.n < pairs}
    if not early:
        return ""
    return "; decided exactly, not run after: " + ", ".join(f"{name} at pair {n}" for name, n in sorted(early.items()))


def as_decision(verdict: Verdict) -> VerdictDecision:
    """The verdict's judgement alone (what `orchard compare` also produces)."""
    return VerdictDecision(verdict.verdict, verdict.metrics, verdict.gates, verdict.reasons, verdict.unjudged)


def print_decision(console: Console, decision: VerdictDecision, warnings: Sequence[str]) -> None:
    """Metric table, gates, warnings, the verdict and its reasons."""
    if decision.metrics:
        print_metrics(console, decision.metrics)
    for gate in decision.gates:
        mark = "[green]pass[/]" if gate.passed else "[red]FAIL[/]"
        console.print(f"gate {escape(gate.name)}: {mark} {escape(gate.detail)}")
    for warning in warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}")
    style = _OVERALL_STYLE.get(decision.verdict, "bold")
    console.print(f"verdict: [{style}]{decision.verdict}[/]")
    for reason in decision.reasons:
        console.print(f"  - {reason}", markup=False)


def verdict_facts(verdict: Verdict, suite: str) -> list[str]:
    """What a summary states above the metric table: inputs, calibration, warnings."""
    facts = [f"suite `{suite}`: baseline `{verdict.baseline}`, candidate `{verdict.candidate}`"]
    if verdict.seed is None:  # no campaign: identical programs
        return [*facts, "nothing measured"]
    facts += [
        f"{verdict.pairs} pairs judged of up to {verdict.planned_pairs}{early_scenarios(verdict)}, "
        f"pair order seed {verdict.seed}",
        calibration_line(verdict.calibration),
        *([verdict.confinement] if verdict.confinement else []),
        *([verdict.variants.line()] if verdict.variants else []),
    ]
    return facts + [f"warning: {warning}" for warning in verdict.warnings] + [
        f"advice: {advice.line()}" for advice in verdict.advice]


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
            bounds_text(*m.interval),
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
        "| Scenario | Subject | Runs | Failures | Median wall | Median CPU | Median stdout | Est. tokens |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for (scenario, subject), group in sorted(groups.items()):
        lines.append(
            f"| {scenario} | {subject} | {len(group)} | {sum(1 for r in group if r.get('returncode') != 0)} | "
            f"{_median(group, 'wall_ms')} | {_median(group, 'cpu_ms')} | {_median(group, 'stdout_bytes')} | "
            f"{_median(group, 'estimated_total_tokens')} |"
        )
    for row in verdicts:
        lines += ["", f"**Verdict: {row.get('verdict')}** after {row.get('pairs')} pairs."]
        lines += [f"- {reason}" for reason in row.get("reasons") or []]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class SubjectMedians:
    """One scenario and subject of a `bench run`: its runs, failures and the median of each suite metric."""

    scenario: str
    subject: str
    runs: int
    failures: int
    medians: dict[str, float | None]


def run_medians(suite: Suite, rows: Sequence[Mapping[str, Any]]) -> list[SubjectMedians]:
    """Medians per scenario and subject of every metric the suite names, what `bench run` prints."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        if row.get("step_kind") == "measured":
            groups[(str(row.get("scenario")), str(row.get("role") or row.get("subject")))].append(row)
    fields = dict.fromkeys(spec.metric for spec in suite.metrics)
    found = []
    for (scenario, subject), group in sorted(groups.items()):
        medians = {metric: statistics.median(numbers) if (numbers := _values(group, metric)) else None
                   for metric in fields}
        found.append(SubjectMedians(scenario, subject, len(group), sum(1 for r in group if r.get("returncode") != 0),
                                    medians))
    return found


def run_json(suite: Suite, writer: RunWriter, seed: int) -> dict[str, Any]:
    """`bench run --json`."""
    return {"schema": RUN_SCHEMA, "suite": suite.name, "seed": seed, "rows": str(writer.path),
            "summary": str(writer.summary_path), "results": [asdict(m) for m in run_medians(suite, writer.rows)]}


def run_table(suite: Suite, writer: RunWriter) -> Table:
    """`bench run` on a terminal: one row per scenario and subject, each median in its metric's unit."""
    found = run_medians(suite, writer.rows)
    table = Table(show_edge=False, header_style="bold")
    for column in ("scenario", "subject", "runs", "failures", *dict.fromkeys(spec.metric for spec in suite.metrics)):
        table.add_column(column, justify="left" if column in ("scenario", "subject") else "right")
    for m in found:
        table.add_row(m.scenario, m.subject, str(m.runs), str(m.failures),
                      *(quantity(value, metric) if value is not None else "unmeasured"
                        for metric, value in m.medians.items()))
    return table


def _median(rows: Sequence[Mapping[str, Any]], metric: str) -> str:
    values = _values(rows, metric)
    return quantity(statistics.median(values), metric) if values else "unmeasured"


def _values(rows: Sequence[Mapping[str, Any]], metric: str) -> list[float]:
    """A metric's values in rows, as the verdict judges them (a harness's own samples where it reported them)."""
    return [reading.value for row in rows if (reading := readings(row).get(metric)) is not None]
