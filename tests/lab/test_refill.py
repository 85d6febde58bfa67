"""`orchard run` refills its backlog from the planner when open hypotheses fall below the free workers,
on a real LocalCluster, and file-disjoint scopes still hold across the cluster's workers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import psutil
import pytest

from orchard.lab.db.state import LabState
from orchard.lab.loop.lab import Lab
from orchard.lab.records.events import BacklogChanged, RefillStopped
from orchard.lab.workers.dask.remote import lab_id, scratch_dir
from orchard.lab.workers.workspace.workspace_init import init_workspace
from tests.lab.lab_helpers import (
    BENCH_FILES,
    NO_CHANGE_BENCH,
    README_TARGET,
    TARGET_FILES,
    command_launcher,
    lab_config,
    make_repo,
    one_worker,
    processes_marked,
)
from tests.lab.test_planner import STANDIN, hypothesis_toml

# Two of the planner's hypotheses share a file: they must never run at once.
ANSWER = (hypothesis_toml("alpha-cache", scope=["src/alpha.txt"])
          + hypothesis_toml("alpha-batch", scope=["src/alpha.txt", "src/beta.txt"])
          + hypothesis_toml("gamma-lazy", scope=["src/gamma.txt"]))


@pytest.mark.slow
@pytest.mark.timeout(1200)  # measurements on a shared machine; the lab's own waits are bounded
def test_the_planner_refills_a_dry_backlog_and_scopes_stay_disjoint_on_the_cluster(
        tmp_path: Path, mark: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCHARD_TEST_MARK", mark)
    answer = tmp_path / "answer.toml"
    answer.write_text(ANSWER)
    # The stand-in answers planning prompts; run as a worker it finds no output file named and
    # exits 1 having changed nothing, so every experiment here is killed: only scheduling is tested.
    config = tmp_path / "orchard.toml"
    config.write_text(lab_config(
        target=README_TARGET, bench=NO_CHANGE_BENCH,
        workers=one_worker(count=2, exploit=2, executor="dask", scheduler="local", refill=True,
                           # the stand-in planner and its answer, outside the workspace
                           sandbox_read=[str(answer), str(STANDIN)]),
        launcher=command_launcher(f"{sys.executable} {STANDIN} {{prompt_file}} {answer}"),
        stop={"top_attempted": 10},
    ))
    target, bench = make_repo(tmp_path / "target", TARGET_FILES), make_repo(tmp_path / "bench", BENCH_FILES)
    ws = init_workspace(tmp_path / "ws", str(target), str(bench), config)
    state = LabState.open(ws.root)
    try:
        reason = Lab(ws, state, say=lambda _: None).run()
        added = [e.event.added for e in state.events_of(BacklogChanged) if e.event.planner]
        refill = state.events_of(RefillStopped)
        experiments = {e.hypothesis: e for e in state.experiments()}
    finally:
        state.close()
    # the empty backlog (0 open < 2 free workers) was refilled once; the second answer repeated the
    # first (ids already in the backlog) and was rejected whole, which stopped refilling for this run
    assert added == [("alpha-cache", "alpha-batch", "gamma-lazy")]
    assert len(refill) == 1 and "already in the backlog" in refill[0].event.stopped
    assert set(experiments) == {"alpha-cache", "alpha-batch", "gamma-lazy"}, reason
    # the two hypotheses sharing src/alpha.txt never ran at the same time on the cluster
    first, second = sorted((experiments["alpha-cache"], experiments["alpha-batch"]), key=lambda e: e.started_at)
    assert first.finished_at is not None and first.finished_at <= second.started_at
    # multiprocessing's resource tracker belongs to this test process (it ends with it), not to the lab
    left = [p for p in processes_marked(mark) if p.status() != psutil.STATUS_ZOMBIE
            and not (p.ppid() == os.getpid() and "multiprocessing.resource_tracker" in " ".join(p.cmdline()))]
    assert left == []
    assert not scratch_dir(lab_id(ws.root)).exists()
