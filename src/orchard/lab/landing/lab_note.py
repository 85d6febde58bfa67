"""The lab note: the commit message of a landed win, with what was tried, what came out and the numbers."""

from __future__ import annotations

import math

from orchard.lab.judge.verdict_view import after_pairs
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.records.judgment import Judgment
from orchard.lab.text import visible


def _signed(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:+.2%}"


def lab_note(hypothesis: Hypothesis, judgment: Judgment, experiment: str) -> str:
    """The commit message: what was tried, what came out, with the numbers."""
    verdict = judgment.verdict
    result = "?" if verdict is None else f"{verdict.verdict} {after_pairs(verdict.pairs)} (seed {verdict.seed})"
    lines = [
        f"lab: {visible(hypothesis.title)}",
        "",
        f"Experiment {experiment}, hypothesis {hypothesis.id} ({hypothesis.lane} lane).",
        "",
        f"Hypothesis: {visible(hypothesis.change)}",
        f"Suspected cause: {visible(hypothesis.suspected_cause or '(not given)')}",
        f"Metric: {visible(hypothesis.metric)}; predicted effect: {hypothesis.predicted_text}",
        "",
        f"Result: {result}.",
    ]
    for m in [] if verdict is None else verdict.metrics:
        low, high = m.interval or (None, None)
        lines.append(
            f"  {m.key}: {m.verdict} {_signed(m.effect)} [{_signed(low)}, {_signed(high)}], floor {m.floor:.2%}, "
            f"n={m.n}, {m.baseline_median} -> {m.candidate_median}"
        )
    checks = [c for c in judgment.checks if c.detail != "not configured"]  # only the checks that ran
    lines += ["", "Checks: " + "; ".join(f"{c.name} {'ok' if c.passed else 'FAILED'}" for c in checks)]
    return "\n".join(lines) + "\n"
