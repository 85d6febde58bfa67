"""orchard.bench: the measurement half, usable alone.

The lab uses only this public surface: load a suite, calibrate, run a
verdict, read rows, rank opportunities, ask who holds the measurement lock,
withhold held-out inputs. Nothing in bench imports lab.

Each name is imported when first asked for: every lab command reads the bench's verdict records, and
importing the whole surface up front (numpy, the statistics, the display) cost each `orchard status`,
`orchard backlog add` or refused `orchard run` about 0.2 s of CPU it did not use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchard.bench.binary import check_binary as check_binary
    from orchard.bench.campaigns.campaign import calibrate as calibrate
    from orchard.bench.campaigns.campaign import run_verdict as run_verdict
    from orchard.bench.campaigns.shared_campaign import SharedVerdicts as SharedVerdicts
    from orchard.bench.campaigns.shared_campaign import run_shared_verdicts as run_shared_verdicts
    from orchard.bench.deciding.calibration import Calibration as Calibration
    from orchard.bench.deciding.calibration import CalibrationFailed as CalibrationFailed
    from orchard.bench.deciding.verdict import Direction as Direction
    from orchard.bench.deciding.verdict import ExternalRun as ExternalRun
    from orchard.bench.deciding.verdict import GateResult as GateResult
    from orchard.bench.deciding.verdict import Method as Method
    from orchard.bench.deciding.verdict import MetricResult as MetricResult
    from orchard.bench.deciding.verdict import MetricVerdict as MetricVerdict
    from orchard.bench.deciding.verdict import Unjudged as Unjudged
    from orchard.bench.deciding.verdict import Verdict as Verdict
    from orchard.bench.deciding.verdict import VerdictWord as VerdictWord
    from orchard.bench.held_out.holdout import is_held_out as is_held_out
    from orchard.bench.held_out.holdout import suite_holds_back as suite_holds_back
    from orchard.bench.held_out.holdout import withhold as withhold
    from orchard.bench.lock import LockState as LockState
    from orchard.bench.lock import LockStatus as LockStatus
    from orchard.bench.lock import MeasurementLock as MeasurementLock
    from orchard.bench.lock import lock_status as lock_status
    from orchard.bench.results.opportunities import rank as rank_opportunities
    from orchard.bench.results.opportunity import Opportunity as Opportunity
    from orchard.bench.results.store import latest_rows as latest_rows
    from orchard.bench.sandbox.confinement import ClosedTree as ClosedTree
    from orchard.bench.sandbox.confinement import RunConfinement as RunConfinement
    from orchard.bench.sandbox.confinement import confine_runs as confine_runs
    from orchard.bench.sandbox.confinement import open_to_sandbox as open_to_sandbox
    from orchard.bench.suites.suite import Suite as Suite
    from orchard.bench.suites.suite_reader import load_suite as load_suite
    from orchard.jsonlines import read_jsonl as read_jsonl

# Each public name: the module that defines it, and its name there.
_HOMES = {
    "check_binary": ("orchard.bench.binary", "check_binary"),
    "Calibration": ("orchard.bench.deciding.calibration", "Calibration"),
    "CalibrationFailed": ("orchard.bench.deciding.calibration", "CalibrationFailed"),
    "calibrate": ("orchard.bench.campaigns.campaign", "calibrate"),
    "run_verdict": ("orchard.bench.campaigns.campaign", "run_verdict"),
    "ClosedTree": ("orchard.bench.sandbox.confinement", "ClosedTree"),
    "RunConfinement": ("orchard.bench.sandbox.confinement", "RunConfinement"),
    "confine_runs": ("orchard.bench.sandbox.confinement", "confine_runs"),
    "open_to_sandbox": ("orchard.bench.sandbox.confinement", "open_to_sandbox"),
    "suite_holds_back": ("orchard.bench.held_out.holdout", "suite_holds_back"),
    "is_held_out": ("orchard.bench.held_out.holdout", "is_held_out"),
    "withhold": ("orchard.bench.held_out.holdout", "withhold"),
    "LockState": ("orchard.bench.lock", "LockState"),
    "LockStatus": ("orchard.bench.lock", "LockStatus"),
    "MeasurementLock": ("orchard.bench.lock", "MeasurementLock"),
    "lock_status": ("orchard.bench.lock", "lock_status"),
    "rank_opportunities": ("orchard.bench.results.opportunities", "rank"),
    "Opportunity": ("orchard.bench.results.opportunity", "Opportunity"),
    "SharedVerdicts": ("orchard.bench.campaigns.shared_campaign", "SharedVerdicts"),
    "run_shared_verdicts": ("orchard.bench.campaigns.shared_campaign", "run_shared_verdicts"),
    "latest_rows": ("orchard.bench.results.store", "latest_rows"),
    "Suite": ("orchard.bench.suites.suite", "Suite"),
    "load_suite": ("orchard.bench.suites.suite_reader", "load_suite"),
    "Direction": ("orchard.bench.deciding.verdict", "Direction"),
    "ExternalRun": ("orchard.bench.deciding.verdict", "ExternalRun"),
    "GateResult": ("orchard.bench.deciding.verdict", "GateResult"),
    "Method": ("orchard.bench.deciding.verdict", "Method"),
    "MetricResult": ("orchard.bench.deciding.verdict", "MetricResult"),
    "MetricVerdict": ("orchard.bench.deciding.verdict", "MetricVerdict"),
    "Unjudged": ("orchard.bench.deciding.verdict", "Unjudged"),
    "Verdict": ("orchard.bench.deciding.verdict", "Verdict"),
    "VerdictWord": ("orchard.bench.deciding.verdict", "VerdictWord"),
    "read_jsonl": ("orchard.jsonlines", "read_jsonl"),
}

__all__ = [  # the names above, listed for mypy and ruff (tests/bench/test_surface.py checks they agree)
    "check_binary",
    "Calibration",
    "CalibrationFailed",
    "calibrate",
    "run_verdict",
    "ClosedTree",
    "RunConfinement",
    "confine_runs",
    "open_to_sandbox",
    "suite_holds_back",
    "is_held_out",
    "withhold",
    "LockState",
    "LockStatus",
    "MeasurementLock",
    "lock_status",
    "rank_opportunities",
    "Opportunity",
    "SharedVerdicts",
    "run_shared_verdicts",
    "latest_rows",
    "Suite",
    "load_suite",
    "Direction",
    "ExternalRun",
    "GateResult",
    "Method",
    "MetricResult",
    "MetricVerdict",
    "Unjudged",
    "Verdict",
    "VerdictWord",
    "read_jsonl",
]


def __getattr__(name: str) -> object:
    """The public name `name`, imported from its module on first use (PEP 562)."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _HOMES[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value
