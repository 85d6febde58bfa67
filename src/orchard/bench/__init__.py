"""orchard.bench: the measurement half, usable alone.

The lab uses only this public surface: load a suite, calibrate, run a
verdict, read rows, rank opportunities, ask who holds the measurement lock,
withhold held-out inputs. Nothing in bench imports lab.
"""

from orchard.bench.binary import check_binary
from orchard.bench.calibration import Calibration, CalibrationFailed
from orchard.bench.campaign import calibrate, run_verdict
from orchard.bench.confinement import RunConfinement, confine_runs
from orchard.bench.holdout import is_held_out, withhold
from orchard.bench.lock import LockState, LockStatus, MeasurementLock, lock_status
from orchard.bench.opportunities import rank as rank_opportunities
from orchard.bench.shared_campaign import SharedVerdicts, run_shared_verdicts
from orchard.bench.store import latest_rows
from orchard.bench.suite import Suite
from orchard.bench.suite_reader import load_suite
from orchard.bench.verdict import (
    Direction,
    ExternalRun,
    GateResult,
    Method,
    MetricResult,
    MetricVerdict,
    Unjudged,
    Verdict,
    VerdictWord,
)
from orchard.jsonlines import read_jsonl

__all__ = [
    "Calibration",
    "CalibrationFailed",
    "Direction",
    "ExternalRun",
    "RunConfinement",
    "SharedVerdicts",
    "GateResult",
    "LockState",
    "LockStatus",
    "MeasurementLock",
    "MetricResult",
    "Method",
    "MetricVerdict",
    "Suite",
    "Unjudged",
    "calibrate",
    "check_binary",
    "confine_runs",
    "is_held_out",
    "latest_rows",
    "load_suite",
    "lock_status",
    "rank_opportunities",
    "read_jsonl",
    "run_shared_verdicts",
    "run_verdict",
    "withhold",
    "Verdict",
    "VerdictWord",
]
