"""The research loop: keep the lanes busy, judge what comes back, stop on clear conditions.

One `Lab` drives one workspace. On its first run it anchors everything (`start`: its calibration runs beside the
first workers, and no verdict is taken before it). Then, until a stop condition holds (`stop`), the loop's one
thread keeps four things moving, none waiting for another:

1. collect: a worker that ended is collected at once (diff against its base, bench untouched, scope kept,
   report, cost) into lab.db;
2. judge, in the background: each collected candidate goes to a judge thread (at most `workers.judges` at
   once: their clean checkouts, builds and tests overlap, their measurements take turns under the machine-wide
   lock); a decided win is landed by one landing thread at a time;
3. decide and record, when a judgment arrives: LAND, KILL or ITERATE into
   lab.db, the journal, leaderboard and backlog brought up to date; after a
   landed win the opportunities are re-read, and every few wins the full
   sweep runs;
4. assign: each free worker takes the best open hypothesis of its lane
   whose scope is disjoint from every running experiment's, while the
   judge works (and, with `workers.refill`, the planner tops the backlog up
   when it runs short). A poll that finds nothing new decides nothing (db/settled.py).

Judge and landing threads open their own lab.db connection; every decision is recorded by the loop's thread.
Every step's outcome is in lab.db before the next starts, so `orchard run` after a crash (even SIGKILL)
resumes: running workers are adopted again (or collected, or restarted if they died unseen), half-judged
candidates are judged again from clean, half-landed wins finish landing; nothing is judged or landed twice.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor

from orchard.lab.config.sections import ExecutorKind
from orchard.lab.db import workspace_lock
from orchard.lab.db.running_time import RunClock
from orchard.lab.db.settled import Settled
from orchard.lab.db.state import LabState
from orchard.lab.judge.gathering import Gathering
from orchard.lab.judge.measuring import MeasureProgress, metric_keys
from orchard.lab.landing import land as landing
from orchard.lab.landing import pins, publication
from orchard.lab.loop import backlog, collection, isolation, resume, stop, sweep, worker_start
from orchard.lab.loop.agent_retry import Agents
from orchard.lab.loop.disk_limits import DiskLimits
from orchard.lab.loop.isolation import Stage, end_experiment, lab_wide, pausing
from orchard.lab.loop.judging import Judging
from orchard.lab.loop.landed import judge_again
from orchard.lab.loop.landed import record as record_landing
from orchard.lab.loop.refill import Refill
from orchard.lab.loop.slots import slots
from orchard.lab.loop.start import start_beside
from orchard.lab.loop.steering import Steering
from orchard.lab.notebook import files as records
from orchard.lab.records.db import ExperimentRecord
from orchard.lab.records.events import BacklogChanged, EventKind, SandboxNoted
from orchard.lab.records.experiment import Experiment, ExperimentStatus
from orchard.lab.records.hack_findings import WinHeld
from orchard.lab.records.hypothesis import HypothesisStatus
from orchard.lab.records.judgment import Decision, Judgment, JudgmentEntry
from orchard.lab.records.worker import WorkerCheckout
from orchard.lab.workers.executors import Executor, make_executor
from orchard.lab.workers.lab_executor import lab_executor
from orchard.lab.workers.launchers.launcher_base import Launcher
from orchard.lab.workers.launchers.launchers import launcher_for, preflight
from orchard.lab.workers.sandbox.sandbox import sandbox_notes
from orchard.lab.workers.workspace.workspace import Workspace

POLL_S = 0.5
Say = Callable[[str], None]
Status = ExperimentStatus


class Lab:
    def __init__(self, ws: Workspace, state: LabState, *, say: Say = print,
                 measure_progress: MeasureProgress | None = None) -> None:
        self.ws, self.state = ws, state
        self.say, self.measure_progress = say, measure_progress
        self.launchers: dict[str, Launcher] = {}
        self.agents = Agents(ws.config.workers.retry_minutes * 60)  # launchers whose agent failed in this run
        self.executor: Executor | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._judging: dict[str, tuple[ExperimentRecord, Future[Judgment]]] = {}
        self._landing: dict[str, tuple[ExperimentRecord, Future[landing.LandOutcome]]] = {}
        self.refill = Refill()  # the planner topping the backlog up, on its own executor (never the workers')
        self.deferred: set[str] = set()  # hypotheses whose launch failed, or a person stopped, in this run
        self.steering = Steering(state, RunClock())  # what people asked while it runs; the time it runs
        self._settled = Settled()
        self.notebook = records.Notebook(ws)
        self.decided: dict[str, Judgment] = {}  # the wins this run's judges decided, handed to their landing
        self.disk = DiskLimits()
        # built candidates measured together; a judge host measures one at a time
        self.gathering = Gathering(1 if ws.config.workers.judge_hosts else ws.config.workers.shared_baseline)
        self.judge_work = Judging(ws, say, measure_progress, self.gathering)  # here, or on the lab's judge hosts

    def failed(self, record: ExperimentRecord, stage: Stage, error: BaseException) -> None:
        """One experiment failed (see lab/loop/isolation.py): record why and go on, unless the lab itself failed."""
        if lab_wide(error) or self.state.experiment(record.name).status in (Status.LANDING, Status.DONE):
            raise error  # the lab's own failure, or one after the experiment's end was recorded
        if self.executor is not None and record.name in self.executor.running():
            self.executor.cancel(record.name, f"its {stage} failed" if stage != Stage.WORK else str(error))
        if stage in (Stage.LAUNCH, Stage.WORK, Stage.COLLECT):  # the worker is still this experiment's
            self.ws.remove_worker(record.worker)  # first: what a worker that filled the disk wrote is freed
        shutil.rmtree(self.ws.judge_dir / record.name, ignore_errors=True)
        reason = end_experiment(self.state, record, stage, error, self.ws.config.workers.count)
        if stage == Stage.LAUNCH:
            self.deferred.add(record.hypothesis)
        self.say(f"{record.name}: {reason}")
        self.render()

    def render(self) -> None:
        self.notebook.update(self.state)  # with what was just recorded, without drawing it all again

    def _inputs(self) -> Hashable:
        """What a decision reads, but the clock: lab.db (its version) and the loop's own threads and sets."""
        return (self.state.version(), self.refill.plan is None, self.refill.failed, tuple(self._judging),
                tuple(self._landing), self.agents.state(), frozenset(self.deferred))

    def experiment(self, record: ExperimentRecord) -> Experiment:
        hypothesis = self.state.hypothesis(record.hypothesis).hypothesis
        checkout = WorkerCheckout(self.ws.worker(record.worker), record.target_base, record.bench_base)
        return Experiment(record.name, hypothesis, checkout)

    def launcher(self, record: ExperimentRecord) -> Launcher:
        """The launcher the experiment's hypothesis names (the lab's default when it names none)."""
        name = self.state.hypothesis(record.hypothesis).hypothesis.launcher
        if name not in self.launchers:
            self.launchers[name] = launcher_for(self.ws.config, name)
        return self.launchers[name]

    def launcher_down(self, launcher: str) -> None:
        self.agents.down.add(launcher)

    def launcher_wait(self, launcher: str, in_a_row: int) -> float:
        return self.agents.wait(launcher, in_a_row)

    def blocked(self) -> set[str]:
        """Open hypotheses whose launcher, or their own launch, failed in this run."""
        if not self.agents.down and not self.deferred:
            return set()
        return {r.id for r in self.state.hypotheses(HypothesisStatus.OPEN)
                if r.hypothesis.launcher in self.agents.down or r.id in self.deferred}

    def launch(self, record: ExperimentRecord) -> None:
        """Start the experiment's worker; a failure re-queues its hypothesis and the lab goes on."""
        try:
            worker_start.start_worker(self, record)
        except Exception as error:
            self.failed(record, Stage.LAUNCH, error)

    def assign(self) -> None:
        running = self.state.experiments(Status.STARTING, Status.RUNNING)
        busy_workers = {e.worker for e in running}
        busy_scopes = [self.state.hypothesis(e.hypothesis).hypothesis.scope for e in running]
        for slot in slots(self.ws):
            if slot.worker in busy_workers:
                continue
            record = backlog.pick(self.state, slot.lane, busy_scopes, skip=self.agents.held(self.state, self.blocked()))
            if record is None:
                continue
            name = backlog.experiment_name(record)
            pins.check(self.ws, self.state, publication.main_branch(self.ws, self.state))  # bases come from it
            with self.state.transaction():
                self.state.update_hypothesis(record.id, status=HypothesisStatus.RUNNING, attempt=True)
                self.state.add_experiment(name, record.id, slot.worker, slot.lane,
                                          self.state.counter(stop.LOOP) + 1, self.ws.target_base(),
                                          self.ws.bench_base(), Status.STARTING)
            busy_scopes.append(record.hypothesis.scope)
            self.launch(self.state.experiment(name))

    def dispatch(self) -> None:
        """Hand every decided win to the landing thread and collected candidates to free judge threads."""
        assert self._pool is not None
        for record in self.state.experiments(Status.LANDING):
            if record.name not in self._landing:  # this run's judgment, else lab.db's (checked against the journal)
                judgment = self.decided.get(record.name, record.judgment)
                assert judgment is not None
                hypothesis = self.state.hypothesis(record.hypothesis).hypothesis
                landed = self._pool.submit(self.judge_work.land, record, judgment, hypothesis)
                self._landing[record.name] = (record, landed)
        for record in self.state.experiments(Status.JUDGING, Status.COLLECTED):
            if record.name in self._judging:
                continue
            if len(self._judging) >= self.gathering.jobs(self.judge_work.threads):
                break
            self.state.update_experiment(record.name, status=Status.JUDGING)
            self.say(f"{record.name}: judging")
            self._judging[record.name] = (record, self._pool.submit(self.judge_work.judge, record))

    def harvest(self) -> bool:
        """Record the judgments and landings that finished; False when none did."""
        if self.judge_work.begun.check():
            self.render()  # the lab's start, recorded by its pool thread
        finished = False
        for name, (record, judged) in list(self._judging.items()):
            if judged.done():
                del self._judging[name]
                stage = Stage.JUDGE
                try:
                    judgment = judged.result()
                    stage = Stage.RECORD
                    self._decide(record, judgment)
                except Exception as error:
                    self.failed(record, stage, error)
                finished = True
        for name, (record, landed) in list(self._landing.items()):
            if landed.done():
                del self._landing[name]
                self.decided.pop(name, None)
                self._landed(record, landed.result())
                finished = True
        return finished

    def _decide(self, record: ExperimentRecord, judgment: Judgment) -> None:
        entry = self.state.hypothesis(record.hypothesis)
        hypothesis = entry.hypothesis
        status = Status.LANDING if judgment.decision == Decision.LAND else Status.DONE
        status = Status.HELD if judgment.held else status
        event = JudgmentEntry.of(judgment, hypothesis, None if record.candidate is None else record.candidate.usage,
                                 self.ws.config.workers.sandbox)
        with self.state.transaction():
            self.state.update_experiment(record.name, status=status, judgment=judgment,
                                         decision=judgment.decision, reasons=judgment.reasons)
            self.state.log(event, record.name)
            if event.held:
                self.state.log(WinHeld(event.held), record.name)
            if judgment.decision == Decision.KILL:
                self.state.update_hypothesis(hypothesis.id, status=HypothesisStatus.KILLED)
                lowered = backlog.learn_from_kill(self.state, entry)
                if lowered:
                    self.state.log(BacklogChanged(lowered=tuple(lowered), because=f"{hypothesis.id} was killed"),
                                   record.name)
            elif judgment.decision == Decision.ITERATE:
                self.state.update_hypothesis(hypothesis.id, status=HypothesisStatus.ITERATED)
                child = backlog.sharpen(self.state, hypothesis, judgment.reasons)
                self.state.add_hypothesis(child, source="iterate", parent=hypothesis.id)
            else:
                self.state.update_hypothesis(hypothesis.id, status=HypothesisStatus.LANDED)
            stop.count_judged(self.state, self.ws.config.workers.count, status == Status.LANDING)
            self.state.set_counter(stop.LAUNCHER_FAILURES, 0)  # a worker that worked ends a run of launcher failures
        if status == Status.LANDING:
            self.decided[record.name] = judgment
        held = f" (held for a person: `orchard review {self.ws.root}`)" if judgment.held else ""
        self.say(f"{record.name}: {judgment.decision}{held}: {'; '.join(judgment.reasons)[:300]}")
        if judgment.checkout and judgment.decision != Decision.LAND:
            shutil.rmtree(judgment.checkout, ignore_errors=True)
        self.render()

    def _landed(self, record: ExperimentRecord, outcome: landing.LandOutcome) -> None:
        if outcome.judge_lost is not None:
            self.say(judge_again(self.state, record, outcome.judge_lost))
            self.render()
            return
        won, said = record_landing(self.state, record, outcome, revisits=self.ws.config.workers.revisit)
        self.say(said)
        self.render()
        if won and sweep.after_win(self.ws, self.state, say=self.say, measure_progress=self.measure_progress):
            self.render()

    # -- the loop ----------------------------------------------------------------------------

    def finish(self, reason: str) -> None:
        self.judge_work.begun.check()  # raised: a failed calibration the loop stopped before
        stop.final_verdict(self.ws, self.state, say=self.say, measure_progress=self.measure_progress)
        self.steering.clock.check(self.state)  # the final verdict's time, and the last pass's
        stop.log_stop(self.state, reason)
        records.write_notebook(self.ws, self.state, final=True)
        self.say(f"stopped: {reason}; wrote {self.ws.root / 'FINAL_REPORT.md'}")

    def preflight(self) -> None:
        """Before anything is touched: every launcher runs (its agent logged in), every open hypothesis names
        one that exists, and the suite is valid."""
        for note in preflight(self.ws.config, workspace=self.ws.root):
            self.say(note)
        for record in self.state.hypotheses(HypothesisStatus.OPEN):
            launcher_for(self.ws.config, record.hypothesis.launcher)
        metric_keys(self.ws)  # the suite is read whole now: a bad one is refused before anything is recorded

    def run(self) -> str:
        """Run until a stop condition holds; returns the reason. A second run on the workspace is refused."""
        with pausing(self.ws.root), workspace_lock.hold(self.ws.root):
            return self._run()

    def _research(self) -> str:
        """The loop's passes, until a stop condition holds and no experiment is still active: returns why."""
        while True:
            self.disk.check(self)
            collection.collect(self)
            self.refill.collect(self.ws, self.state, self.say)
            if self.harvest():
                continue  # a decision changes the backlog and the stop conditions
            if self._settled.unchanged(self._inputs()):
                time.sleep(POLL_S)  # nothing to decide from anew
                continue
            reason = None
            if not self.steering.steer(self):  # paused: no new workers, no stop condition read (steering.py)
                self.refill.start(self.ws, self.state, self.say)
                reason = stop.stop_reason(self.ws, self.state, self.blocked(),
                                          planning=self.refill.plan is not None)
                if reason is None:
                    self.assign()
            self.dispatch()
            if reason is not None and not self.state.experiments(*Status.active()):
                return reason
            self._settled.decided(self._inputs())
            time.sleep(POLL_S)

    def _run(self) -> str:
        self.preflight()
        for note in self.ws.uncommitted():  # said at each start: the lab takes commits only
            self.say(f"note: {note}")
        if (empty := stop.before_start(self.ws, self.state)) is not None:  # before building or calibrating
            self.finish(empty)
            return empty
        if backed := isolation.backup(self.state):  # the last good copy `orchard recover` restores; again on landing
            self.say(backed)
        if (events := self.state.events()) and events[-1].kind == EventKind.STOP:
            self.state.set_counter(stop.IDLE_LOOPS, 0)  # a new session after a clean stop starts fresh
        workers = self.ws.config.workers
        self.executor = lab_executor(self.ws)
        reason: str | None = None
        try:
            with self.executor, resume.stopping(self):
                if self.executor.kind == ExecutorKind.SUBPROCESS and workers.executor == ExecutorKind.AUTO:
                    self.say("tmux is not installed: workers run as plain subprocesses")
                self.disk.check(self, now=True)  # before anything is written: what a crashed run left filling it
                self.judge_work.open_hosts(self.executor)
                for note in sandbox_notes(workers.sandbox, self.ws.config.target.build_network):
                    self.say(note)
                    self.state.log(SandboxNoted(note))
                publication.check_publication(self.ws, self.state)
                threads = self.gathering.jobs(self.judge_work.threads, most=True) + 2  # + landing, calibration
                planner = make_executor(ExecutorKind.SUBPROCESS, self.ws.tmux_socket, self.ws.executor_dir)
                with self.judge_work.pool(threads) as pool, planner as planner_executor:
                    self._pool = pool
                    self.judge_work.started(start_beside(self.ws, self.state, pool, say=self.say,
                                                         measure_progress=self.measure_progress))
                    resume.resume_workers(self)
                    self.refill = Refill(planner_executor if workers.refill else None)
                    reason = self._research()
        finally:
            self.executor = None
            self.judge_work.hosts = None
            self._pool = None
            self.refill = Refill()
            self._judging.clear()
            self._landing.clear()
        assert reason is not None
        self.finish(reason)
        return reason
