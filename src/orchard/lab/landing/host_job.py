"""What runs on a judge host: one measuring step of an experiment, whole, on that machine.

`run_on_judge_host` is the dask task. The judge host keeps its own copy of
the lab (`remote.judge_scratch`: one per dask worker), laid out like a
workspace, with a lab.db of its own that holds only what this machine built
and ran: its baselines (built once per commit, here), its bench-test
passes. It fetches the lab's served repositories into that copy (the target
at the step's newest commit, the bench at the experiment's bench base) and
runs the step with the lab's own functions, so every verdict is measured
under this machine's lock, against this machine's A/A calibration (the
bench's cache, keyed by its machine) and this machine's baseline: the
judge (`ladder.judge`), the confirmation (`measured.confirmation`) or main
after a merge against the previous main. It answers with the typed record
the lab needs and names itself (`JudgeHost`); the checkouts it made are
removed before it answers (the lab never reads a judge host's paths).
"""

from __future__ import annotations

import shutil
import socket
from dataclasses import dataclass, replace

from filelock import FileLock

from orchard.lab.config.orchard_toml import Config
from orchard.lab.db.state import LabState
from orchard.lab.judge.measuring import Verdict
from orchard.lab.landing.measured import OnThisMachine
from orchard.lab.records.candidate import Candidate
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.records.judge_host import JudgeHost, JudgeStep
from orchard.lab.records.judgment import Judgment
from orchard.lab.workers.dask.remote import judge_scratch, sync
from orchard.lab.workers.dask.serving import ServedRepositories
from orchard.lab.workers.workspace.workspace import Workspace

JUDGE_TOPIC = "orchard-judges"  # dask's event log: where each step started (the lab journals it)


@dataclass(frozen=True)
class HostJob:
    """One step for a judge host, and everything it needs: nothing of the lab's host but served repositories."""

    lab_id: str
    key: str  # the dask task's key: names this attempt in the event log
    experiment: str
    name: str  # what its judge checkouts are named after (the experiment, or its rebase onto a new main)
    step: JudgeStep
    repositories: ServedRepositories
    config: Config
    bench_base: str
    base: str  # the target commit: the candidate's base (verdict), main (rebase, confirm), the previous main
    candidate: Candidate | None = None  # verdict, rebase: what is judged
    judgment: Judgment | None = None  # confirm: what lands
    hypothesis: Hypothesis | None = None  # confirm: its scope checks the patch again
    commit: str = ""  # main-check: main after the merge


@dataclass(frozen=True)
class HostAnswer:
    """What a judge host sends back: who it is, and the step's judgment, verdict or refusal."""

    judge: JudgeHost
    judgment: Judgment | None = None
    verdict: Verdict | None = None
    refused: str | None = None


def _announce(job: HostJob) -> JudgeHost:
    """This host, written into dask's event log as the one running `job` (the lab journals it)."""
    from distributed import get_worker

    worker = get_worker()
    found = JudgeHost(socket.gethostname(), worker.address)
    worker.log_event(JUDGE_TOPIC, {"key": job.key, "host": found.host, "address": found.address})
    return found


def run_on_judge_host(job: HostJob) -> HostAnswer:
    """The dask task: the step run on this host's own copy of the lab, with its own numbers."""
    here = _announce(job)
    ws = Workspace(judge_scratch(job.lab_id, here.address), job.config)
    for directory in (ws.root, ws.judge_dir, ws.results_dir):
        directory.mkdir(parents=True, exist_ok=True)
    with FileLock(str(ws.root / ".judge.lock")):  # one step at a time in this copy
        sync(job.repositories.target, ws.reference_target, job.commit or job.base)
        sync(job.repositories.bench, ws.bench_dir, job.bench_base)
        state = LabState.open(ws.root)
        try:
            return _run(ws, state, job, here)
        finally:
            state.close()
            shutil.rmtree(ws.judge_dir / job.name, ignore_errors=True)


def _run(ws: Workspace, state: LabState, job: HostJob, here: JudgeHost) -> HostAnswer:
    local = OnThisMachine()
    if job.step in (JudgeStep.VERDICT, JudgeStep.REBASE):
        assert job.candidate is not None
        judged = local.rejudge(ws, state, job.name, job.candidate, job.base, job.bench_base, lambda _: None, None)
        return HostAnswer(here, judgment=replace(judged, checkout=None, judge=here))
    if job.step == JudgeStep.CONFIRM:
        assert job.judgment is not None and job.hypothesis is not None
        found = local.confirm(ws, state, job.base, job.judgment, job.name, job.hypothesis, None)
        return HostAnswer(here, refused=found) if isinstance(found, str) else HostAnswer(here, verdict=found)
    return HostAnswer(here, verdict=local.main_check(ws, state, job.base, job.commit, None)[0])


