"""The lab's judge hosts: verdicts sent to any of them, a win's later measurements to its own.

With `[workers] judge_hosts = N`, the lab waits at its start for N dask
workers declaring the `judge` resource on its cluster (each checked as a
worker host is: reach to the served repositories, the sandbox). A
candidate's verdict is then one dask task (`host_job.run_on_judge_host`)
claiming `judge=1`: dask places it on a judge host with a free slot, so a
host runs one step at a time. The judgment names its host, and that host
holds the lease on the experiment: the landing's rebase verdict, its
confirmation and its main check are submitted pinned to it (`OnJudgeHost`,
`JudgeHost.pinned`). A verdict whose host is lost mid-way is run again by
dask on another judge host, from scratch; a pinned step whose host has left
the cluster is not run anywhere else (`JudgeHostGone`). Each step's start is
journaled (`JudgeStarted`): what `orchard status` shows as each judge's
queue. Waiting threads poll (one subscription to the judge hosts' events for them all,
`StartLog`); the lab's loop thread never waits here. When the lab stops
(Ctrl-C, SIGTERM) its `stopping` event is set: each waiting thread cancels
its dask task and raises `LabStopping` at once, rather than wait for a
verdict that may run long, sit queued behind others or never run at all;
the experiment is still JUDGING (or LANDING) in lab.db, so the next run
judges it again from clean (or finishes its landing).
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from orchard.errors import OrchardError, UsageError
from orchard.lab.config.orchard_toml import Config
from orchard.lab.judge.ladder import Progress
from orchard.lab.judge.measuring import MeasureProgress, Verdict
from orchard.lab.landing.host_job import JUDGE_TOPIC, HostAnswer, HostJob, run_on_judge_host
from orchard.lab.records.candidate import Candidate
from orchard.lab.records.db import ExperimentRecord
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.records.judge_host import JUDGE_RESOURCE, UNPINNED, JudgeHost, JudgeStarted, JudgeStep
from orchard.lab.records.judgment import Judgment
from orchard.lab.workers.dask.remote import host_problem
from orchard.lab.workers.dask.serving import ServedRepositories
from orchard.lab.workers.dask.topic import Topic
from orchard.lab.workers.workspace.workspace import Workspace

if TYPE_CHECKING:
    from orchard.lab.db.state import LabState

WAIT_S = 30.0  # for the judge hosts to join at the start
POLL_S = 0.5


class JudgeHostGone(OrchardError):
    """The judge host an experiment is leased to has left the cluster: its step runs nowhere else."""

    def __init__(self, message: str, judge: JudgeHost, step: JudgeStep) -> None:
        super().__init__(message)
        self.judge, self.step = judge, step


class LabStopping(BaseException):
    """The lab is stopping: a step waiting on a judge host is abandoned, not failed. A BaseException, as
    KeyboardInterrupt is: no handler of one experiment's failure may record it as that experiment's outcome."""


class StartLog:
    """Where judge steps started, as the judge hosts log it: one subscription for all waiting threads, each
    reading its own job's starts by the job's key (reading dask's whole log every poll, per thread, cost the
    scheduler threads x log length twice a second, and the log keeps only a topic's newest 1,000 entries)."""

    def __init__(self, client: Any) -> None:
        self._topic = Topic(client, JUDGE_TOPIC)
        self._lock = threading.Lock()
        self._by_key: dict[str, list[dict[str, Any]]] = {}

    def of(self, key: str) -> list[dict[str, Any]]:
        """The starts of the task `key`, oldest first."""
        with self._lock:
            for message in self._topic.take():
                self._by_key.setdefault(str(message.get("key", "")), []).append(message)
            return list(self._by_key.get(key, []))


def judge_addresses(scheduler_info: dict[str, Any]) -> dict[str, str]:
    """The judge hosts in a scheduler's view of its workers: address -> host."""
    return {address: str(worker.get("host", "")) for address, worker in scheduler_info.get("workers", {}).items()
            if worker.get("resources", {}).get(JUDGE_RESOURCE, 0) >= 1}


@dataclass
class JudgeHosts:
    """The judge hosts of the lab's dask cluster, as one lab run uses them."""

    client: Any  # distributed.Client
    lab_id: str
    repositories: ServedRepositories
    config: Config
    stopping: threading.Event  # set when the lab stops: every wait here ends
    starts: StartLog = field(init=False)

    def __post_init__(self) -> None:
        self.starts = StartLog(self.client)

    @classmethod
    def open(cls, client: Any, lab_id: str, repositories: ServedRepositories, config: Config,
             stopping: threading.Event) -> JudgeHosts:
        """Wait for `[workers] judge_hosts` judge hosts and check each (UsageError naming what is missing)."""
        wanted = config.workers.judge_hosts
        deadline = time.monotonic() + WAIT_S
        while len(found := judge_addresses(client.scheduler_info())) < wanted and time.monotonic() < deadline:
            time.sleep(0.2)
        if len(found) < wanted:
            raise UsageError(f"workers.judge_hosts: {wanted} wanted, {len(found)} on the dask cluster after "
                             f"{WAIT_S:g} s: start each with `dask worker ADDRESS --resources \"judge=1\"`")
        checked = client.run(host_problem, repositories, config.workers, workers=list(found))
        problems = [f"judge host {address}: {problem}" for address, problem in sorted(checked.items()) if problem]
        if problems:
            raise UsageError("; ".join(problems))
        return cls(client, lab_id, repositories, config, stopping)

    def verdict(self, state: LabState, record: ExperimentRecord, progress: Progress) -> Judgment:
        """The candidate judged whole on whichever judge host dask gives it; the judgment names that host."""
        assert record.candidate is not None
        job = self.job(record.name, record.name, JudgeStep.VERDICT, record.bench_base, record.target_base,
                        candidate=record.candidate)
        answer = self.run(state, job, None, progress)
        assert answer.judgment is not None
        return answer.judgment

    def pinned(self, judge: JudgeHost, experiment: str) -> OnJudgeHost:
        return OnJudgeHost(self, judge, experiment)

    def job(self, experiment: str, name: str, step: JudgeStep, bench_base: str, base: str,
             **given: Any) -> HostJob:
        key = f"orchard-judge-{name}-{step}-{uuid.uuid4().hex[:8]}"
        return HostJob(self.lab_id, key, experiment, name, step, self.repositories, self.config, bench_base, base,
                       **given)

    def run(self, state: LabState, job: HostJob, judge: JudgeHost | None, progress: Progress) -> HostAnswer:
        """Submit `job` (to `judge` alone when given) and wait for its answer, journaling where it started
        (LabStopping, its task cancelled, when the lab stops first)."""
        placement = UNPINNED if judge is None else judge.pinned()
        future = self.client.submit(run_on_judge_host, job, key=job.key, pure=False, **placement)
        started: list[JudgeHost] = []  # where dask started it: again, from scratch, after each host lost running it
        while not future.done():
            self._journal_starts(state, job, started, progress)
            if judge is not None and judge.address not in judge_addresses(self.client.scheduler_info()):
                future.cancel()
                raise JudgeHostGone(f"{job.experiment}: its judge host {judge.label} has left the cluster; its "
                                    f"{job.step} runs on no other host (numbers never span two machines)", judge,
                                    job.step)
            if self.stopping.wait(POLL_S):
                future.cancel()
                raise LabStopping(f"{job.experiment}: its {job.step} was abandoned: the lab is stopping")
        self._journal_starts(state, job, started, progress)
        answer: HostAnswer = future.result()
        return answer

    def _journal_starts(self, state: LabState, job: HostJob, started: list[JudgeHost], progress: Progress) -> None:
        """Journal the starts of `job` in the event log beyond the `started` already journaled (each after the first:
        the host before it was lost running it), adding them to `started`."""
        mine = self.starts.of(job.key)
        for message in mine[len(started):]:
            judge = JudgeHost(str(message["host"]), str(message["address"]))
            lost = started[-1] if started else None
            state.log(JudgeStarted(judge, job.step, lost_on=lost), job.experiment)
            again = "" if lost is None else f" (again: judge host {lost.label} was lost running it)"
            progress(f"{job.experiment}: {job.step} on judge host {judge.label}{again}")
            started.append(judge)


@dataclass(frozen=True)
class OnJudgeHost:
    """A win's landing measurements, each on the judge host its judgment names (`measured.Measurements`)."""

    hosts: JudgeHosts
    judge: JudgeHost
    experiment: str

    def rejudge(self, ws: Workspace, state: LabState, name: str, candidate: Candidate, base: str, bench_base: str,
                progress: Progress, measure_progress: MeasureProgress | None) -> Judgment:
        job = self.hosts.job(self.experiment, name, JudgeStep.REBASE, bench_base, base, candidate=candidate)
        answer = self.hosts.run(state, job, self.judge, progress)
        assert answer.judgment is not None
        return answer.judgment

    def confirm(self, ws: Workspace, state: LabState, main_head: str, current: Judgment, name: str,
                hypothesis: Hypothesis, measure_progress: MeasureProgress | None) -> Verdict | str:
        bench_base = state.experiment(self.experiment).bench_base
        job = self.hosts.job(self.experiment, name, JudgeStep.CONFIRM, bench_base, main_head, judgment=current,
                              hypothesis=hypothesis)
        answer = self.hosts.run(state, job, self.judge, lambda _: None)
        if answer.verdict is not None:
            return answer.verdict
        return answer.refused or "the judge host sent no confirmation"

    def main_check(self, ws: Workspace, state: LabState, previous: str, commit: str,
                   measure_progress: MeasureProgress | None) -> tuple[Verdict, JudgeHost | None]:
        """On the win's judge host; when that host is gone (the merge is made), on another judge host: both
        mains are measured there, so the check still compares one machine's numbers."""
        bench_base = state.experiment(self.experiment).bench_base
        job = self.hosts.job(self.experiment, self.experiment, JudgeStep.MAIN_CHECK, bench_base, previous,
                             commit=commit)
        try:
            answer = self.hosts.run(state, job, self.judge, lambda _: None)
        except JudgeHostGone:
            answer = self.hosts.run(state, replace(job, key=f"{job.key}-elsewhere"), None, lambda _: None)
        assert answer.verdict is not None
        return answer.verdict, answer.judge
