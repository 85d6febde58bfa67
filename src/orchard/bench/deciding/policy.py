"""Which verdicts fail a CI job: the `--fail-on` policy.

By default only REGRESSED (and ERROR: nothing could be judged) exit 1, so an
INCONCLUSIVE verdict passes; a stricter pipeline asks for `inconclusive`
(the change must be shown to be within the floor or better), and `any`
fails on every verdict but NO-CHANGE (an improvement too should update the
committed baseline numbers).
"""

from __future__ import annotations

from enum import StrEnum

from orchard.bench.deciding.verdict import VerdictWord


class FailOn(StrEnum):
    REGRESSED = "regressed"
    INCONCLUSIVE = "inconclusive"
    ANY = "any"

    def fails(self, verdict: VerdictWord) -> bool:
        """Whether `verdict` fails under this policy."""
        if verdict in (VerdictWord.REGRESSED, VerdictWord.ERROR):
            return True
        if self is FailOn.INCONCLUSIVE:
            return verdict == VerdictWord.INCONCLUSIVE
        if self is FailOn.ANY:
            return verdict != VerdictWord.NO_CHANGE
        return False
