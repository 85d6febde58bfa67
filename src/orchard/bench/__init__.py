"""orchard.bench: the measurement half, usable alone.

The lab uses only this public surface: load a suite, calibrate, run a
verdict, read rows. Nothing in bench imports lab.
"""

from orchard.bench.calibration import Calibration, CalibrationFailed
from orchard.bench.binary import check_binary
from orchard.bench.campaign import CampaignResult, calibrate, run_verdict
from orchard.bench.store import latest_rows, read_jsonl
from orchard.bench.suite import Suite, load_suite
from orchard.bench.verdict import ERROR, INCONCLUSIVE, NO_CHANGE, PASS, REGRESSED, MetricResult

__all__ = [
    "ERROR",
    "INCONCLUSIVE",
    "NO_CHANGE",
    "PASS",
    "REGRESSED",
    "CampaignResult",
    "Calibration",
    "CalibrationFailed",
    "MetricResult",
    "Suite",
    "calibrate",
    "check_binary",
    "latest_rows",
    "load_suite",
    "read_jsonl",
    "run_verdict",
]
