"""The bench's verdict as the lab's records hold it: the bench's own typed records, data only.

A judgment, a landing step and lab.db's experiment record carry the verdict
the bench returned, so the records floor takes the bench's verdict records
(and only those) from the bench's public surface; everything that runs the
bench goes through `judge/measuring.py`.
"""

from __future__ import annotations

from orchard.bench import ExternalRun, GateResult, MetricResult, MetricVerdict, Verdict, VerdictWord

__all__ = ["ExternalRun", "GateResult", "MetricResult", "MetricVerdict", "Verdict", "VerdictWord"]
