"""The leaderboard: per metric, the lab-start baseline, the landed change with the best paired effect, main now.

Every effect on it is one paired verdict's, with its interval: the best
change's own verdict, and main at the end against main at the start once
the lab stopped. No median of one campaign is divided by another's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace

from orchard.lab.db.state import LabState
from orchard.lab.judge.measuring import MetricVerdict
from orchard.lab.judge.verdict_view import MetricEffect, VerdictView
from orchard.lab.records.judgment import Decision
from orchard.lab.records.lab_start import LAB_START, LabStart


@dataclass(frozen=True)
class LeaderRow:
    metric: str
    direction: str
    baseline: float
    best: float
    by: str  # the experiment, or "baseline" while nothing beat it
    commit: str | None
    main: float
    effect: MetricEffect | None = None  # the best change's own paired effect
    final: MetricEffect | None = None  # main at the end against main at the start, one paired verdict


def directions(state: LabState) -> dict[str, str]:
    raw = state.meta("metric_directions")
    return json.loads(raw) if raw else {}


def _better(a: float, b: float, direction: str) -> bool:
    return a < b if direction == "lower" else a > b


def leaderboard(state: LabState, final: VerdictView | None) -> tuple[LeaderRow, ...]:
    """Per metric: baseline, best value from a landed change, current main, main at the end against the start."""
    start = LabStart.first(state.events(LAB_START))
    dirs = directions(state)
    board = {key: LeaderRow(key, dirs.get(key, "lower"), value, value, "baseline", None, value)
             for key, value in ({} if start is None else start.baseline).items()}
    for experiment in state.experiments():
        judged = None if experiment.judgment is None else VerdictView.from_verdict(experiment.judgment.verdict)
        if experiment.decision != Decision.LAND or judged is None:
            continue
        for metric in judged.metrics:
            row = board.get(metric.key)
            if row is None or metric.candidate is None or metric.verdict != MetricVerdict.IMPROVED:
                continue
            if _better(metric.candidate, row.best, row.direction):
                board[metric.key] = replace(row, best=metric.candidate, by=experiment.name, effect=metric,
                                            commit=experiment.merge_commit or experiment.land_commit)
    mains: Mapping[str, float] = {}
    for measurement in state.measurements("main"):
        mains = {**mains, **{k: v for k, v in measurement.metrics.items() if v is not None}}
    ends = {m.key: m for m in (() if final is None else final.metrics)}
    return tuple(replace(row, main=mains.get(key, row.main), final=ends.get(key)) for key, row in board.items())
