"""A second look before one verdict's regression costs a win.

On a loaded machine the verdict says REGRESSED on a metric now and then
where nothing regressed (ci24: an honest bytes win's `report/wall_ms`
+27% at its MDE, where five verdicts of the same patch that hour saw
-13% to +14%). A regression on metrics alone (every gate passed, the
held-out variants held) beside an improvement, or one that KILLs a win
the judge had landed when main moved or at its confirmation, is measured
once more on fresh samples, and the second verdict decides: a regression
seen twice is real, one seen once is within the verdict's false-alarm
rate. A failed gate, check or variant is never looked at twice, and no
verdict is taken a third time.
"""

from __future__ import annotations

from collections.abc import Callable

from orchard.lab.records.build import Check, CheckName
from orchard.lab.records.judgment import Decision, Judgment
from orchard.lab.records.verdict import MetricVerdict, Verdict, VerdictWord


def regressed_alone(verdict: Verdict | None) -> bool:
    """Whether `verdict` is REGRESSED on metrics alone: no quality gate failed, the held-out variants held."""
    return (verdict is not None and verdict.verdict == VerdictWord.REGRESSED and not verdict.failed_gates
            and (verdict.variants is None or all(check.held is not False for check in verdict.variants.checks)))


def traded(verdict: Verdict) -> bool:
    """A regression on metrics alone beside an improvement: what the judge measures once more."""
    return regressed_alone(verdict) and any(m.verdict == MetricVerdict.IMPROVED for m in verdict.metrics)


def taken(take: Callable[[], Verdict], say: Callable[[str], None]) -> tuple[Verdict, list[Check]]:
    """`take()`'s verdict; when it traded a regression for an improvement, a second one on fresh samples, which
    decides, with the record of the look."""
    first = take()
    if not traded(first):
        return first, []
    say(f"{'; '.join(first.reasons)}, beside an improvement: measured once more on fresh samples")
    second = take()
    return second, [check(first, second)]


def check(first: Verdict, second: Verdict) -> Check:
    """The record of a second look: what the first verdict said, and whether the second saw it again."""
    seen = "seen again" if regressed_alone(second) else "not seen again"
    return Check(CheckName.SECOND_LOOK, True, f"a first verdict was {first.verdict} ({'; '.join(first.reasons)}): "
                                              f"{seen}")


def killed_by_regression_alone(judgment: Judgment) -> bool:
    """Whether `judgment` KILLs on nothing but a metric's regression (every check passed, no gate failed), seen
    by one verdict only: the judgment had no second look of its own."""
    return (judgment.decision == Decision.KILL and all(c.passed for c in judgment.checks)
            and not any(c.name == CheckName.SECOND_LOOK for c in judgment.checks)
            and regressed_alone(judgment.verdict))
