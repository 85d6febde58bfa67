"""Markdown export: the verdict as a CI step summary (GitHub renders it on the run page)."""

from __future__ import annotations

from orchard.bench.deciding.spread import Spread
from orchard.bench.deciding.verdict import Method, VerdictDecision
from orchard.bench.results.display import bounds_text, confidence_text, effect_text, pct
from orchard.units import quantity

_ICON = {"PASS": "✅", "NO-CHANGE": "⚪", "INCONCLUSIVE": "🟡", "REGRESSED": "❌", "ERROR": "❌"}


def _cell(text: str) -> str:
    """Table cells must not break the table."""
    return text.replace("|", "\\|").replace("\n", " ")


def _side(median: float | None, spread: Spread | None, metric: str) -> str:
    shown = quantity(median, metric)
    return shown if spread is None else f"{shown} ({spread.mean_text(metric)}; {spread.range_text(metric)})"


def render(decision: VerdictDecision, facts: list[str]) -> str:
    lines = [f"## orchard verdict: {_ICON.get(decision.verdict, '')} **{decision.verdict}**", ""]
    lines += [f"- {_cell(fact)}" for fact in facts]
    if facts:
        lines.append("")
    if decision.metrics:
        lines += [
            "| Metric | Verdict | Effect | Interval | Floor | n | Baseline median (mean ± σ; min … max) | Candidate |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        for m in decision.metrics:
            label, bounds = confidence_text(m), bounds_text(*m.interval) if m.interval else "-"
            interval = label if m.method == Method.EXACT else f"{bounds} ({label})" if label else bounds
            lines.append(
                f"| `{_cell(m.key)}` | {m.verdict} | {effect_text(m)} | {interval} | "
                f"{pct(m.floor, signed=False)} | {m.n} | {_side(m.baseline_median, m.baseline_spread, m.metric)} | "
                f"{_side(m.candidate_median, m.candidate_spread, m.metric)} |"
            )
        lines.append("")
    for gate in decision.gates:
        lines.append(f"- gate `{_cell(gate.name)}`: {'pass' if gate.passed else '**FAIL**'} {_cell(gate.detail)}")
    if decision.reasons:
        lines += ["", "**Why:**", ""]
        lines += [f"- {_cell(reason)}" for reason in decision.reasons]
    return "\n".join(lines) + "\n"
