"""The loop does not idle its workers while it judges: real tmux workers, a judge whose tests take
a while, and the order of what lab.db and the judge's own test log recorded (no timing asserts)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from orchard.lab.db.state import LabState
from orchard.lab.loop.lab import Lab
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.lab_helpers import (
    NO_CHANGE_BENCH,
    README_TARGET,
    assert_nothing_left,
    command_launcher,
    lab_config,
    one_worker,
)
from tests.lab.loop_support import add_hypotheses

# The report a worker that finished writes (one that writes none is not judged).
FINISH = """printf '{"schema": "orchard.worker-report/1", "experiment": "%s", "status": "done", "summary": "x", \\
"measurements": []}' "$2" > "$1"
"""

def _config(log: Path, finish: Path) -> str:
    """Workers are instant (one line appended to a file); the judge's target tests take a few seconds and
    write to `log` when they start and end, per candidate."""
    return lab_config(
        target={**README_TARGET,
                "test": f"echo start {{experiment}} >> {log} && sleep 3 && echo end {{experiment}} >> {log}"},
        bench=NO_CHANGE_BENCH,
        # the judge's tests report their timing to a file of this test's (the sandbox hides it)
        workers=one_worker(executor="tmux", judges=2, sandbox="none"),
        launcher=command_launcher(f"echo {{experiment}} >> src/alpha.txt && sh {finish} {{report}} {{experiment}}"),
        stop={"top_attempted": 3, "idle_loops": 10},
    )


@pytest.mark.slow
def test_workers_are_assigned_and_collected_while_the_judge_works(
        make_workspace: Callable[..., Workspace], tmp_path: Path, mark: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCHARD_TEST_MARK", mark)
    tests_log = tmp_path / "judge-tests.log"
    finish = tmp_path / "finish.sh"
    finish.write_text(FINISH)
    ws = make_workspace(_config(tests_log, finish))
    state = LabState.open(ws.root)
    try:
        add_hypotheses(state, *({"id": f"h{i}", "scope": ["src/"]} for i in (1, 2, 3)))
        Lab(ws, state, say=lambda _: None).run()
        experiments = sorted(state.experiments(), key=lambda e: e.started_at)
        events = state.events()
    finally:
        state.close()
    assert [e.decision for e in experiments] == ["KILL"] * 3  # every candidate was judged, once
    first, second = experiments[0].name, experiments[1].name

    def position(kind: str, experiment: str) -> int:
        return next(i for i, e in enumerate(events) if e.kind == kind and e.experiment == experiment)

    # the single worker took its next hypothesis before the first judgment was recorded
    assert position("experiment-start", second) < position("judgment", first)
    # and that worker's end was collected while the first candidate was still being judged
    judged_first = events[position("judgment", first)].at
    assert experiments[1].finished_at is not None and experiments[1].finished_at < judged_first
    # the judge's tests of two candidates overlapped (their measurements are serialized by the lock)
    lines = tests_log.read_text().split("\n")
    assert lines.index(f"start {second}") < lines.index(f"end {first}")
    assert_nothing_left(mark, ws.tmux_socket)
