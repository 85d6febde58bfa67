"""A judge host lost while it measures a verdict: dask runs the verdict again, from scratch, on the other judge host,
the lab decides as usual, and its journal says which host was lost. Needs root (a network namespace), as
tests/lab/test_judge_hosts.py does.
"""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path

import psutil
import pytest

from orchard.lab.db.state import LabState
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.judge_host import JudgeStarted, JudgeStep
from tests.lab.judge_host_support import judge_host_lab
from tests.lab.lab_helpers import lab_events as events
from tests.lab.lab_helpers import processes_marked, wait_for
from tests.lab.test_dask import finish, orchard


def _kill_judge_host(mark: str, address: str) -> None:
    """SIGKILL, by pid, the `dask worker` of the judge host at `address` (its nanny first: nothing restarts it) and
    everything it runs, as a machine that dies would."""
    found = [p for p in processes_marked(mark) if "worker" in p.cmdline() and address in p.cmdline()]
    assert found, f"no dask worker for {address}"
    for proc in [tree for nanny in found for tree in (nanny, *nanny.children(recursive=True))]:
        with suppress(psutil.NoSuchProcess):
            proc.kill()


@pytest.mark.slow
@pytest.mark.timeout(1500)  # measurements on a shared machine; the lab's own waits are bounded
def test_a_judge_host_killed_mid_verdict_is_journaled_lost_and_the_other_host_judges_it(
        tmp_path: Path, mark: str) -> None:
    with judge_host_lab(tmp_path, mark, ["count-with-dict"]) as lab:
        ws, first, second = lab.ws, lab.first, lab.second
        lab = orchard("run", str(ws.root), mark=mark)
        try:
            wait_for(lambda: bool(events(ws.root, JudgeStarted)), "a verdict started on a judge host", limit_s=900)
            (measuring,) = [e.event.judge for e in events(ws.root, JudgeStarted)]
            lost, other = (first, second) if measuring.address.startswith(f"tcp://{first.address}:") else (
                second, first)
            _kill_judge_host(mark, lost.address)
            output = finish(lab, timeout=1400)
        finally:
            if lab.poll() is None:
                lab.kill()
                lab.communicate()
    state = LabState.open(ws.root)
    try:
        (experiment,) = state.experiments()
    finally:
        state.close()
    assert experiment.status == ExperimentStatus.DONE and experiment.judgment is not None, output
    judge = experiment.judgment.judge
    assert judge is not None and judge.address.startswith(f"tcp://{other.address}:"), judge  # judged on the other
    verdicts = [e.event for e in events(ws.root, JudgeStarted) if e.event.step == JudgeStep.VERDICT]
    assert [(v.judge, v.lost_on) for v in verdicts] == [(measuring, None), (judge, measuring)], verdicts
    assert f"judge host `{measuring.host}` (dask worker `{measuring.address}`) was lost running it" in (
        ws.root / "JOURNAL.md").read_text()
    assert "was lost running it" in output
