"""A change judged alone against the lab's starting main, as the judge judges every candidate.

A review branch (its whole change) and the best single attempt (one win's
patch) are each judged from a clean checkout of the start plus the change:
build, the target's tests, the bench's tests, the paired verdict against the
start's baseline (the lab's suite, its calibration, its lock), the gates, the
plausibility check on held-out inputs, and the reviewer when one is
configured. The same ladder decides: a LAND alone is a change that still wins
on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from orchard.lab.db.state import LabState
from orchard.lab.finalize.wins import Win
from orchard.lab.judge.ladder import judge
from orchard.lab.judge.measuring import MeasureProgress
from orchard.lab.records.candidate import Candidate
from orchard.lab.records.judgment import Judgment
from orchard.lab.workers.workspace.patches import patch_files
from orchard.lab.workers.workspace.workspace import Workspace


def judged_alone(ws: Workspace, state: LabState, name: str, wins: Sequence[Win], patch: str, start: str, *,
                 progress: Callable[[str], None], measure_progress: MeasureProgress | None) -> Judgment:
    """The judge's judgment of `patch` (the change of `wins`) on `start`, in `judge/<name>/`."""
    first = state.experiment(wins[0].name).candidate
    assert first is not None, f"{wins[0].name} landed without a candidate"
    scope = sorted({entry for win in wins for entry in win.hypothesis.scope}) if all(
        win.hypothesis.scope for win in wins) else []
    candidate: Candidate = replace(first, patch=patch, flags=[], changed_files=patch_files(patch), scope=scope,
                                   scope_violations=[], target_base=start, patch_bytes=len(patch.encode()))
    return judge(ws, state, name, candidate, start, ws.bench_base(), progress=progress,
                 measure_progress=measure_progress)
