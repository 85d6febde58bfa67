"""Where the lab's judge and landing threads do their work: on this machine, or on the lab's judge hosts.

Each judge thread judges one collected candidate from clean; the landing
thread lands one win at a time (each merge moves main, so landings are
serial, and main cannot move between a landing's rebase check and its
merge). Without judge hosts both run here, exactly as the lab always ran
them. With `[workers] judge_hosts`, a judge thread sends the candidate's
verdict to a judge host and waits for it (`landing/judge_hosts.py`), and a
win's landing measures on the judge host its judgment names. A landing
whose judge host has left the cluster before its merge stops there and
says so (`LandOutcome.judge_lost`): the loop sends the win back to be
judged from scratch on another host, so nothing measured on two machines
is ever compared.

The threads are one pool for the lab's run (`pool`). On a normal stop
nothing is in flight (the loop waits for every active experiment first).
On Ctrl-C or SIGTERM the loop's thread leaves with the exception; a plain
`with ThreadPoolExecutor` would then wait for every submitted verdict and
landing, the queued ones too: on judge hosts, every verdict dask still
holds, however long they take (a 64-worker, four-host lab was still
running 600 s after its SIGTERM, docs/benchmarks.md section 8). Instead
the pool's queued work is cancelled and `stopping` is set: threads waiting
on a judge host cancel their dask tasks and return at once; a step
measured on the lab's machine finishes as before. What was cut short is
still JUDGING or LANDING in lab.db: the next run judges it again from
clean, or finishes its landing.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from orchard.lab.db.state import LabState
from orchard.lab.judge.gathering import Gathering
from orchard.lab.judge.ladder import judge
from orchard.lab.judge.measuring import MeasureProgress
from orchard.lab.landing import land as landing
from orchard.lab.landing.judge_hosts import JudgeHostGone, JudgeHosts
from orchard.lab.landing.publication import lab_name
from orchard.lab.loop.start import Anchoring
from orchard.lab.records.db import ExperimentRecord
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.records.judge_host import JudgeLost
from orchard.lab.records.judgment import Judgment
from orchard.lab.workers.executors import Executor
from orchard.lab.workers.workspace.workspace import Workspace


class Judging:
    """The judge and landing threads' work, for one lab run (`hosts`: its judge hosts, when it has them)."""

    def __init__(self, ws: Workspace, say: Callable[[str], None], measure_progress: MeasureProgress | None,
                 gathering: Gathering) -> None:
        self.ws, self.say, self.measure_progress, self.gathering = ws, say, measure_progress, gathering
        self.hosts: JudgeHosts | None = None
        self.stopping = threading.Event()  # the lab is stopping: threads waiting on judge hosts give up (`pool`)
        self._one_landing = threading.Lock()  # merges into main are serial
        workers = ws.config.workers
        # candidates judged at once: `[workers] judges` here, their measurements taking turns under the lock; with
        # judge hosts, `judges` per host: dask holds each host's next verdict while it measures, so a host that
        # finishes starts the next at once instead of idling until the loop's next pass hands its thread one
        self.threads = workers.judges * max(1, workers.judge_hosts)
        self.begun = Anchoring()  # the lab's start: no verdict before its calibration is recorded

    @contextlib.contextmanager
    def pool(self, threads: int) -> Iterator[ThreadPoolExecutor]:
        """The judge and landing threads of one lab run; on an early stop, queued work is dropped and waits on
        judge hosts end."""
        self.stopping.clear()  # a new run of the same lab
        pool = ThreadPoolExecutor(threads, "judge")
        try:
            yield pool
        except BaseException:
            self.stopping.set()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)

    def started(self, start: Future[bool]) -> None:
        """The lab's start, calibrating (`start_beside`) while the first candidates are built."""
        self.begun = Anchoring(start)

    def open_hosts(self, executor: Executor) -> None:
        """The lab's judge hosts on its executor's cluster, when `[workers] judge_hosts` asks for them."""
        if self.ws.config.workers.judge_hosts and (reach := executor.cluster_reach()) is not None:
            self.hosts = JudgeHosts.open(reach.client, reach.lab, reach.repositories, self.ws.config, self.stopping)

    def judge(self, record: ExperimentRecord) -> Judgment:
        """A judge thread: judge the candidate handed to it from clean (its own lab.db connection)."""
        assert record.candidate is not None
        state = LabState.open(self.ws.root)
        try:
            if self.hosts is not None:
                self.begun.wait()
                return self.hosts.verdict(state, record, self.say)
            return judge(self.ws, state, record.name, record.candidate, record.target_base, record.bench_base,
                         progress=self.say, measure_progress=self.measure_progress,
                         measurer=self.begun.measurer(self.gathering.measure))
        finally:
            state.close()

    def land(self, record: ExperimentRecord, judgment: Judgment, hypothesis: Hypothesis) -> landing.LandOutcome:
        """A landing thread: one at a time; its measurements on the judge host that judged the win, if one did."""
        leased = judgment.judge
        measurements = None if leased is None or self.hosts is None else self.hosts.pinned(leased, record.name)
        with self._one_landing:
            state = LabState.open(self.ws.root)
            try:
                landed = landing.land(self.ws, state, record, judgment, hypothesis, progress=self.say,
                                      measure_progress=self.measure_progress, measurements=measurements)
                state.backup()  # every landing's steps are in the last good copy `orchard recover` restores
                return landed
            except JudgeHostGone as gone:  # before its merge (main after a merge is checked on another host)
                now = state.experiment(record.name)
                branch = now.branch or f"lab/{lab_name(self.ws, state)}/{record.name}"
                return landing.LandOutcome(branch, now.land_commit or "", False, None, False, [],
                                           judge_lost=JudgeLost(gone.judge, gone.step, str(gone)))
            finally:
                state.close()
