"""Which verdicts fail a CI job: the `--fail-on` policy.

By default only REGRESSED (and ERROR: nothing could be judged) exit 1, so an
INCONCLUSIVE verdict passes; a stricter pipeline asks for `inconclusive`
(the change must be shown to be within the floor or better), and `any`
fails on every verdict but NO-CHANGE (an improvement too should update the
committed baseline numbers).
"""

from __future__ import annotations

from enum import StrEnum


class FailOn(StrEnum):
    REGRESSED = "regressed"
    INCONCLUSIVE = "inconclusive"
    ANY = "any"

    def fails(self, verdict: str) -> bool:
        """Whether `verdict` (PASS, NO-CHANGE, INCONCLUSIVE, REGRESSED, ERROR) fails under this policy."""
        if verdict in ("REGRESSED", "ERROR"):
            return True
        if self is FailOn.INCONCLUSIVE:
            return verdict == "INCONCLUSIVE"
        if self is FailOn.ANY:
            return verdict != "NO-CHANGE"
        return False
