"""The lab's best single attempt: the win with the largest confirmed effect on the primary metric, judged alone.

The primary metric is the one the landed wins' hypotheses aimed at most
(ties: the suite's order). The best single attempt is the win whose
confirmation verdict improved it most; it is judged alone on the starting
main by the same judge as the review branches, and when it is a review
branch by itself that branch's judgment is the one (no verdict twice).
FINAL_REPORT.md puts it beside main at the end against main at the start.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from orchard.lab.finalize.wins import Win
from orchard.lab.judge.measuring import MetricResult, MetricVerdict, metric_keys
from orchard.lab.records.review_branches import BestSingle, ReviewBranch
from orchard.lab.workers.workspace.workspace import Workspace


def primary_metric(ws: Workspace, wins: Sequence[Win]) -> str:
    """The metric the wins aimed at most, ties broken by the suite's order ("" without wins or metrics)."""
    keys = metric_keys(ws)
    aimed = Counter(win.hypothesis.metric for win in wins if win.hypothesis.metric)
    if not aimed:
        return keys[0] if keys else ""
    order = {key: index for index, key in enumerate(keys)}
    return max(aimed, key=lambda key: (aimed[key], -order.get(key, len(order))))


def confirmed(win: Win, metric: str) -> MetricResult | None:
    """The win's `metric` in its confirmation verdict, when the confirmation found it improved."""
    verdict = win.confirmation
    found = [m for m in (verdict.metrics if verdict else ()) if m.key == metric
             and m.verdict == MetricVerdict.IMPROVED and m.effect is not None]
    return found[0] if found else None


def best_win(wins: Sequence[Win], metric: str) -> Win | None:
    """The win whose confirmation improved `metric` most (None when none improved it)."""
    scored = [(m.direction.gain(m.effect or 0.0), index, win) for index, win in enumerate(wins)
              if (m := confirmed(win, metric)) is not None]
    return max(scored, key=lambda found: (found[0], -found[1]))[2] if scored else None


def alone_in(branches: Sequence[ReviewBranch], win: Win) -> ReviewBranch | None:
    """The review branch that is this win alone, judged (None when the win shares its branch)."""
    return next((b for b in branches if b.wins == (win.name,) and b.judgment is not None), None)


def unmeasured(metric: str, win: Win | None) -> BestSingle:
    """The record before the win is judged alone (or with no win to judge)."""
    if win is None:
        return BestSingle(metric, "", None)
    found = confirmed(win, metric)
    return BestSingle(metric, win.name, None if found is None else found.effect, win.judgment.patch_sha256)
