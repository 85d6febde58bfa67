"""FINAL_REPORT.md's comparison with the best single attempt: did composing the wins beat the best one alone?

The lab's result is main at the end against main at the start (one paired
verdict, taken when the lab stops); the best single attempt is the win with
the largest confirmed effect on the primary metric, judged alone against the
same start by `orchard finalize` (records/review_branches.py). The share of the lab's
gain the composition added beyond it is taken on log ratios, since effects
compose by multiplication: 1 - log(alone) / log(lab).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from orchard.lab.judge.measuring import Direction
from orchard.lab.judge.verdict_view import MetricEffect, interval, pct, short_commit
from orchard.lab.records.review_branches import Review
from orchard.lab.text import inline

HEAD = ["## Against the best single attempt", ""]


def _log_gain(effect: float | None, direction: Direction) -> float | None:
    """An effect as a log-ratio gain (positive is better); None when it has none."""
    if effect is None or not math.isfinite(effect) or effect <= -1:
        return None
    return direction.gain(math.log1p(effect))


def composition_share(lab: float | None, alone: float | None, direction: Direction) -> float | None:
    """The share of the lab's gain its composition added beyond the best single attempt (None: no lab gain)."""
    lab_gain, alone_gain = _log_gain(lab, direction), _log_gain(alone, direction)
    if lab_gain is None or alone_gain is None or lab_gain <= 0:
        return None
    return 1.0 - alone_gain / lab_gain


def _row(who: str, m: MetricEffect | None, verdict: str) -> str:
    shown = "-" if m is None else f"{pct(m.effect)} {interval(m.low, m.high)} ({m.verdict})"
    return f"| {who} | {shown} | {verdict} |"


def best_single_lines(review: Review | None, final: Sequence[MetricEffect] | None, final_word: str,
                      direction: Direction | None, wins: int) -> list[str]:
    """The section: not measured yet, no candidate, or the two effects side by side with the share."""
    if review is None or review.best is None:
        return [*HEAD, "Not measured yet: `orchard finalize` judges the best win alone on the starting main and "
                       "writes the comparison here."]
    best = review.best
    if not best.experiment:
        return [*HEAD, f"No landed win improved the primary metric `{inline(best.metric)}` in its confirmation: no "
                       "single attempt to compare with."]
    verdict = best.judgment.verdict if best.judgment else None
    if verdict is None:
        why = "; ".join(best.judgment.reasons) if best.judgment else "not judged"
        return [*HEAD, f"The best single attempt `{best.experiment}` could not be judged alone on the starting main "
                       f"`{short_commit(review.start)}`: {inline(why)}."]
    alone = next((MetricEffect.from_metric(m) for m in verdict.metrics if m.key == best.metric), None)
    lab = next((m for m in final or () if m.key == best.metric), None)
    lines = [*HEAD, f"Primary metric `{inline(best.metric)}` (the one the landed wins aimed at most). The best single "
                    f"attempt is `{best.experiment}`, the win with the largest confirmed effect on it "
                    f"({pct(best.confirmed)} in its confirmation), judged alone against the starting main "
                    f"`{short_commit(review.start)}` by the same paired verdict as main at the end:", "",
             "| against the starting main | effect [interval] | verdict |", "|---|---:|---|",
             _row(f"the lab: main at the end, {wins} wins", lab, final_word),
             _row(f"best single attempt alone: `{best.experiment}`", alone, verdict.verdict), ""]
    share = None if direction is None or lab is None or alone is None else composition_share(
        lab.effect, alone.effect, direction)
    if share is None:
        return [*lines, "The lab's main did not gain on this metric against the start: there is no gain to share."]
    if share <= 0:
        return [*lines, f"On `{inline(best.metric)}` the composition of the lab's wins added nothing beyond the best "
                        "single attempt: alone it did as well or better. Both are paired verdicts with their own "
                        "intervals: a difference within their noise is no difference."]
    return [*lines, f"The composition of the lab's wins added {share:.0%} of the lab's gain on "
                    f"`{inline(best.metric)}` beyond the best single attempt (on log ratios: effects compose by "
                    "multiplication). Both are paired verdicts with their own intervals: a share within their noise "
                    "is no difference."]
