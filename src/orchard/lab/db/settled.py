"""When the loop may skip deciding: nothing it decides from changed since it last decided.

Twice a second the loop collects ended workers and finished judgments. Only
when one of those, or anything in lab.db, or the loop's own view of its
threads and launchers changed since its last decision does it evaluate the
stop conditions again, assign free workers and hand candidates to judges:
each of those reads every hypothesis and experiment from lab.db, which a
quiet poll (workers and judges busy) would otherwise repeat for nothing.
A quiet lab still decides every `RECHECK_S`, for what only time changes
(the wall-time budget). `orchard serve` rebuilds its page by the same rule.
"""

from __future__ import annotations

import time
from collections.abc import Hashable

RECHECK_S = 5.0


class Settled:
    """What the loop (or the dashboard) last decided from, and when."""

    def __init__(self) -> None:
        self._inputs: Hashable = None
        self._at = 0.0

    def unchanged(self, inputs: Hashable) -> bool:
        """Whether deciding again now would read exactly what the last decision read, and it is recent."""
        return inputs == self._inputs and time.monotonic() - self._at < RECHECK_S

    def decided(self, inputs: Hashable) -> None:
        """The loop just decided (assigned, dispatched, checked the stop conditions) with these inputs."""
        self._inputs, self._at = inputs, time.monotonic()
