"""Plausibility: a win too large to believe must show on inputs the worker never saw.

A change that special-cases the visible inputs, or caches their outputs,
can improve a metric by orders of magnitude; so can a real change, rarely.
A target metric improved by more than the suite's `plausible` factor is
flagged in the journal either way, and it lands only when the judge's
verdict confirms it on held-out scenarios: none of them regressed (a
regression already makes the verdict REGRESSED) and the same metric improved
on at least one of them. Without held-out scenarios it cannot be confirmed.
"""

from __future__ import annotations

import math

from orchard.lab.judge.measuring import MetricResult, MetricVerdict, Verdict, is_held_out
from orchard.lab.records.build import Check

NAME = "plausible"


def factor(m: MetricResult) -> float:
    """How many times better the candidate is on `m`: baseline/candidate (lower is better) or its inverse.

    1.0 for anything not improved; infinite when a lower-is-better metric fell to zero.
    """
    if m.verdict != MetricVerdict.IMPROVED or m.effect is None or not math.isfinite(m.effect):
        return 1.0
    ratio = 1.0 + m.effect  # candidate / baseline
    if m.direction == "lower":
        return math.inf if ratio <= 0 else 1.0 / ratio
    return ratio


def _times(value: float) -> str:
    return "unbounded" if math.isinf(value) else f"{value:.1f}x"


def check(verdict: Verdict, bound: float) -> Check | None:
    """The plausibility check for a verdict, or None when every target win is within the bound."""
    wild = [m for m in verdict.metrics if m.target and not is_held_out(m) and factor(m) > bound]
    if not wild:
        return None
    claim = ", ".join(f"{_times(factor(m))} on {m.key}" for m in wild)
    beyond = f"{claim} beyond the plausible bound {bound:g}x"
    held_out = [m for m in verdict.metrics if is_held_out(m)]
    if not held_out:
        return Check(NAME, False, f"{beyond} and no held-out inputs to confirm it")
    unconfirmed = []
    for metric in dict.fromkeys(m.metric for m in wild):
        same = [m for m in held_out if m.metric == metric]
        shown = [m for m in same if m.verdict == MetricVerdict.IMPROVED]
        if not shown:
            seen = ", ".join(f"{m.key} {m.verdict}" for m in same) or "no held-out scenario measures it"
            unconfirmed.append(f"{metric} ({seen})")
    if unconfirmed:
        return Check(NAME, False, f"{beyond}, not confirmed on held-out inputs: {'; '.join(unconfirmed)}")
    shown_on = ", ".join(f"{_times(factor(m))} on {m.key}" for m in held_out if factor(m) > 1)
    return Check(NAME, True, f"{beyond}, confirmed on held-out inputs ({shown_on}); flagged for a human look")
