"""The lab's start: the anchor every later delta is measured from.

Once per workspace, before any worker runs: record the main branch, check
that the harness's own tests pass at the bench base, build the target's
base, calibrate the verdict (A/A) on this machine and record the baseline
medians and noise floors in the journal and the leaderboard. A lab whose
bench has its own verdict script calibrates nothing here. The loop calibrates
beside its first workers (`start_beside`): the calibration holds the
measurement lock and no verdict is taken before it, but the workers' agents
and the judge's builds and tests need neither.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future

from orchard.errors import OrchardError, disk_full
from orchard.lab.db.state import LabState
from orchard.lab.judge.ladder import Measurer
from orchard.lab.judge.measuring import Baseline, MeasureProgress, Verdict, calibrate
from orchard.lab.landing.publication import main_branch
from orchard.lab.records.build import BuiltBinary
from orchard.lab.records.lab_start import LabStart
from orchard.lab.workers.workspace.builds import (
    BASELINE_MEASURED,
    baseline_binary,
    files_changed,
    harness_tests,
    placeholders,
)
from orchard.lab.workers.workspace.workspace import Workspace


def recorded_start(state: LabState) -> LabStart | None:
    """The lab's start as the journal recorded it (None before it started)."""
    starts = state.events_of(LabStart)
    return starts[0].event if starts else None


def start(ws: Workspace, state: LabState, *, say: Callable[[str], None] = print,
          measure_progress: MeasureProgress | None = None) -> bool:
    """Build the base, check the harness, calibrate and measure the baseline (once; False if done before)."""
    anchor = prepare(ws, state, say)
    if anchor is None:
        return False
    anchor(state, measure_progress)
    return True


FULL_DISK_RETRY_S = 120.0
BASELINE_REBUILDS = 3  # a calibration spoiled by a changed baseline: built and calibrated again


def start_beside(ws: Workspace, state: LabState, pool: Executor, *, say: Callable[[str], None] = print,
                 measure_progress: MeasureProgress | None = None) -> Future[bool]:
    """`start`, its calibration and baseline in `pool`: the loop's first workers run beside it (their agents, the
    judge's builds and tests), and what measures waits for it (`Anchoring`). The harness check and the base build
    are done on return."""
    anchor = prepare(ws, state, say)
    if anchor is None:
        done: Future[bool] = Future()
        done.set_result(False)
        return done
    return pool.submit(_anchored, ws, anchor, measure_progress)


def _anchored(ws: Workspace, anchor: Anchor, measure_progress: MeasureProgress | None) -> bool:
    """A pool thread's calibration, recorded through its own lab.db connection.

    It runs beside the first workers, so a worker that fills the disk can make it fail: the loop's disk check
    stops that worker and frees its checkout, so a calibration that failed on a full disk is taken again (it
    records nothing until it succeeds) for up to `FULL_DISK_RETRY_S` before the failure stops the lab.
    """
    state = LabState.open(ws.root)
    deadline = time.monotonic() + FULL_DISK_RETRY_S
    try:
        while True:
            try:
                anchor(state, measure_progress)
                return True
            except Exception as error:
                if not disk_full(error) or time.monotonic() > deadline:
                    raise
                time.sleep(1.0)
    finally:
        state.close()


Anchor = Callable[[LabState, MeasureProgress | None], None]


def prepare(ws: Workspace, state: LabState, say: Callable[[str], None]) -> Anchor | None:
    """The start's first half (main recorded, harness tested, base built): None if the lab started before, else
    its second half, which calibrates and records the lab's start."""
    if state.meta("started_at") is not None:
        return None
    base, bench_base = ws.target_base(), ws.bench_base()
    main_branch(ws, state)
    say(f"lab start: base {base[:12]}, bench {bench_base[:12]}")
    values = placeholders(ws, ws.reference_target, None)
    bench_tests = harness_tests(ws, state, bench_base, values, ws.judge_dir / "start-logs")
    if not bench_tests.passed:
        raise OrchardError(f"the harness suite fails at the bench base: {bench_tests.detail}; "
                           "fix the harness before running the lab")
    binary = baseline_binary(ws, state, base)

    def anchor(state: LabState, measure_progress: MeasureProgress | None) -> None:
        calibrated = not (ws.suite(ws.bench_dir) is None and ws.config.bench.verdict)
        if not calibrated:
            entry = LabStart(base, bench_base, str(binary.path), "by the bench's own verdict command")
        else:
            baseline = _calibrated(ws, state, base, binary, measure_progress, say)
            state.set_meta("metric_directions", json.dumps(baseline.directions))
            entry = LabStart(base, bench_base, str(binary.path), baseline.calibration, baseline.medians,
                             baseline.floors)
        with state.transaction():
            if calibrated:
                state.add_measurement("baseline", base, entry.baseline)
                state.add_measurement("main", base, entry.baseline)
            state.log(entry)
            state.set_meta("started_at", str(time.time()))

    return anchor


def _calibrated(ws: Workspace, state: LabState, base: str, binary: BuiltBinary,
                measure_progress: MeasureProgress | None, say: Callable[[str], None]) -> Baseline:
    """The base's A/A calibration. It runs beside the first workers, and one that reaches the cached baseline
    (with `sandbox = "none"`) and changes it spoils the campaign, which then counts nothing: the baseline is built
    again (journaled as BaselineRebuilt, as the judge does) and calibrated again, `BASELINE_REBUILDS` times at most."""
    rebuilt = 0
    while True:
        with BASELINE_MEASURED:  # a judge that finds it changed rebuilds it after, not under the runs
            try:
                return calibrate(ws, binary, measure_progress, say)
            except (OrchardError, OSError):  # OSError: its files gone
                if rebuilt == BASELINE_REBUILDS or not files_changed(binary):
                    raise
        rebuilt += 1
        binary = baseline_binary(ws, state, base)


class Anchoring:
    """The lab's start as the loop's threads see it while it calibrates: a verdict waits for it (the workers, the
    judge's builds and tests do not), and its failure stops the lab from the loop's thread."""

    def __init__(self, started: Future[bool] | None = None) -> None:
        self.started = started
        self._seen = started is None

    def check(self) -> bool:
        """True once, when the start was just recorded; its error is raised here (in the loop's thread)."""
        if self._seen or self.started is None or not self.started.done():
            return False
        self.started.result()
        self._seen = True
        return True

    def wait(self) -> None:
        """Until the calibration is recorded (its error raised here)."""
        if self.started is not None:
            self.started.result()

    def measurer(self, measure: Measurer) -> Measurer:
        """`measure`, once the calibration is recorded."""

        def after_start(ws: Workspace, baseline: BuiltBinary, candidate: BuiltBinary, *,
                        progress: MeasureProgress | None = None) -> Verdict:
            self.wait()
            return measure(ws, baseline, candidate, progress=progress)

        return after_start
