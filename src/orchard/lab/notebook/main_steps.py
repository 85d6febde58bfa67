"""main over time: its effect against the lab's start after every merge, revert and sweep.

Read from the journal: a sweep measured main against the first baseline
directly; every other step chains its main check (against the previous main)
onto the step before, its interval multiplied bound by bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from orchard.lab.judge.verdict_view import MetricEffect, VerdictView
from orchard.lab.records.db import JournalEvent
from orchard.lab.records.lab_start import LAB_START, LabStart


@dataclass(frozen=True)
class MainStep:
    """main after one change: every metric's effect against the lab's start."""

    at: float
    commit: str
    label: str  # what made this step (lab start, an experiment, a revert, a sweep)
    effects: tuple[MetricEffect, ...]
    paired_with_start: bool  # measured against the first baseline directly (else chained)


def _chain(previous: MetricEffect | None, step: MetricEffect) -> MetricEffect:
    """An effect against the start from the previous one and this step's effect against the previous main.

    The interval multiplies the bounds: wider than a joint interval would be, never narrower."""
    if previous is None or previous.effect is None or step.effect is None:
        return step
    def times(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else (1 + a) * (1 + b) - 1
    return MetricEffect(key=step.key, verdict=step.verdict, effect=times(previous.effect, step.effect),
                        low=times(previous.low, step.low), high=times(previous.high, step.high),
                        floor=step.floor, n=step.n, mde=None, baseline=previous.baseline,
                        candidate=step.candidate, exact=step.exact)


def main_steps(events: Sequence[JournalEvent], baseline: Mapping[str, float],
               floors: Mapping[str, float]) -> list[MainStep]:
    """main's value against the lab's start after every merge, revert and sweep, oldest first."""
    starts = [e for e in events if e.kind == LAB_START]
    if not starts:
        return []
    start = starts[0]
    zero = tuple(MetricEffect(key, "baseline", 0.0, 0.0, 0.0, floors.get(key, 0.0), 0, None, value, value,
                              floors.get(key) == 0.0) for key, value in sorted(baseline.items()))
    steps = [MainStep(start.at, LabStart.from_dict(start.data).base, "lab start", zero, True)]
    merges: dict[str | None, str] = {}
    for event in events:
        kind, data = event.kind, event.data
        current = {m.key: m for m in steps[-1].effects}
        if kind == "merge":
            merges[event.experiment] = data.get("commit", "")
        elif kind == "main-check":
            verdict = VerdictView.from_document(data.get("verdict"))
            if verdict is None:
                continue
            effects = tuple(_chain(current.get(m.key), m) for m in verdict.metrics)
            steps.append(MainStep(event.at, merges.get(event.experiment, ""), event.experiment or "",
                                  effects, False))
        elif kind == "revert":
            steps.append(MainStep(event.at, data.get("revert", ""), f"revert {event.experiment}",
                                  steps[-1].effects, steps[-1].paired_with_start))
        elif kind == "sweep":
            verdict = VerdictView.from_document(data.get("verdict"))
            if verdict is None:
                continue
            if steps[-1].commit == data.get("main"):  # the sweep measured the step just drawn: its numbers win
                last = steps.pop()
                steps.append(MainStep(last.at, last.commit, f"{last.label} (swept)", verdict.metrics, True))
            else:
                steps.append(MainStep(event.at, data.get("main", ""), "sweep", verdict.metrics, True))
    return steps
