"""Markdown export: the verdict as a CI step summary (GitHub renders it on the run page)."""

from __future__ import annotations

from orchard.bench.display import bounds_text, pct, quantity
from orchard.bench.verdict import VerdictDecision

_ICON = {"PASS": "✅", "NO-CHANGE": "⚪", "INCONCLUSIVE": "🟡", "REGRESSED": "❌", "ERROR": "❌"}


def _cell(text: str) -> str:
    """Table cells must not break the table."""
    return text.replace("|", "\\|").replace("\n", " ")


def render(decision: VerdictDecision, facts: list[str]) -> str:
    lines = [f"## orchard verdict: {_ICON.get(decision.verdict, '')} **{decision.verdict}**", ""]
    lines += [f"- {_cell(fact)}" for fact in facts]
    if facts:
        lines.append("")
    if decision.metrics:
        lines += [
            "| Metric | Verdict | Effect | Interval | Floor | n | Baseline | Candidate |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        for m in decision.metrics:
            interval = "exact" if m.method == "exact" else (bounds_text(*m.interval) if m.interval else "-")
            lines.append(
                f"| `{_cell(m.key)}` | {m.verdict} | {pct(m.effect)} | {interval} | {pct(m.floor, signed=False)} | "
                f"{m.n} | {quantity(m.baseline_median, m.metric)} | {quantity(m.candidate_median, m.metric)} |"
            )
        lines.append("")
    for gate in decision.gates:
        lines.append(f"- gate `{_cell(gate.name)}`: {'pass' if gate.passed else '**FAIL**'} {_cell(gate.detail)}")
    if decision.reasons:
        lines += ["", "**Why:**", ""]
        lines += [f"- {_cell(reason)}" for reason in decision.reasons]
    return "\n".join(lines) + "\n"
