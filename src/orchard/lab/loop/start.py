"""The lab's start: the anchor every later delta is measured from.

Once per workspace, before any worker runs: record the main branch, check
that the harness's own tests pass at the bench base, build the target's
base, calibrate the verdict (A/A) on this machine and record the baseline
medians and noise floors in the journal and the leaderboard. A lab whose
bench has its own verdict script calibrates nothing here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from orchard.errors import OrchardError
from orchard.lab.db.state import LabState
from orchard.lab.judge.measuring import MeasureProgress, calibrate
from orchard.lab.landing.publication import main_branch
from orchard.lab.records.lab_start import LAB_START, LabStart
from orchard.lab.workers.builds import baseline_binary, harness_tests, placeholders
from orchard.lab.workers.workspace import Workspace


def recorded_start(state: LabState) -> LabStart | None:
    """The lab's start as the journal recorded it (None before it started)."""
    return LabStart.first(state.events(LAB_START))


def start(ws: Workspace, state: LabState, *, say: Callable[[str], None] = print,
          measure_progress: MeasureProgress | None = None) -> bool:
    """Build the base, check the harness, calibrate and measure the baseline (once; False if done before)."""
    if state.meta("started_at") is not None:
        return False
    base, bench_base = ws.target_base(), ws.bench_base()
    main_branch(ws, state)
    say(f"lab start: base {base[:12]}, bench {bench_base[:12]}")
    values = placeholders(ws, ws.reference_target, None)
    bench_tests = harness_tests(ws, state, bench_base, values, ws.judge_dir / "start-logs")
    if not bench_tests.passed:
        raise OrchardError(f"the harness suite fails at the bench base: {bench_tests.detail}; "
                           "fix the harness before running the lab")
    binary = baseline_binary(ws, state, base)
    calibrated = not (ws.suite(ws.bench_dir) is None and ws.config.bench.verdict)
    if not calibrated:
        entry = LabStart(base, bench_base, str(binary.path), "by the bench's own verdict command")
    else:
        baseline = calibrate(ws, binary, measure_progress, say)
        state.set_meta("metric_directions", json.dumps(baseline.directions))
        entry = LabStart(base, bench_base, str(binary.path), baseline.calibration, baseline.medians, baseline.floors)
    with state.transaction():
        if calibrated:
            state.add_measurement("baseline", base, entry.baseline)
            state.add_measurement("main", base, entry.baseline)
        state.log(LAB_START, entry.to_dict())
        state.set_meta("started_at", str(time.time()))
    return True
