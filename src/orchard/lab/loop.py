"""The research loop: keep the lanes busy, judge what comes back, stop on clear conditions.

One `Lab` drives one workspace. On its first run it anchors everything
(`start`). Then, until a stop condition holds (`stop`), the loop's one
thread keeps four things moving, none waiting for another:

1. collect: a worker that ended is collected at once (diff against its
   base, bench untouched, scope kept, report, cost) into lab.db;
2. judge, in the background: each collected candidate goes to a judge
   thread (at most `workers.judges` at once: their clean checkouts, builds
   and tests overlap, their measurements take turns under the machine-wide
   lock); a decided win is landed by one landing thread at a time;
3. decide and record, when a judgment arrives: LAND, KILL or ITERATE into
   lab.db, the journal, leaderboard and backlog rendered again; after a
   landed win the opportunities are re-read, and every few wins the full
   sweep runs;
4. assign: each free worker takes the best open hypothesis of its lane
   whose scope is disjoint from every running experiment's, while the
   judge works (and, with `workers.refill`, the planner tops the backlog up
   when it runs short).

Judge and landing threads open their own lab.db connection; every decision
is recorded by the loop's thread. Every step's outcome is in lab.db before
the next starts, so `orchard run` after a crash (even SIGKILL) resumes:
running workers are adopted again (or collected, or restarted if they died
unseen), half-judged candidates are judged again from clean, half-landed
wins finish landing, and nothing is judged or landed twice.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchard.errors import OrchardError
from orchard.lab import backlog, pins, planner, publication, records, stop, workspace_lock
from orchard.lab import land as landing
from orchard.lab.builds import baseline_binary, give_baseline, placeholders, run_step
from orchard.lab.candidate import Candidate, Flag, collect_candidate, from_remote
from orchard.lab.db_records import ExperimentRecord
from orchard.lab.executors import Executor, JobResult, SubprocessExecutor, make_executor
from orchard.lab.executors.dask import DaskExecutor
from orchard.lab.experiment import Experiment, ExperimentStatus
from orchard.lab.hypothesis import HypothesisStatus, Lane
from orchard.lab.isolation import Stage, end_experiment, lab_wide
from orchard.lab.judge import judge
from orchard.lab.judgment import Decision, Judgment, JudgmentEntry
from orchard.lab.launcher import Launcher
from orchard.lab.launchers import launcher_for, preflight
from orchard.lab.prompts import render_prompt
from orchard.lab.remote import RemoteExperiment, RemoteOutcome, lab_id
from orchard.lab.sandbox import UNSANDBOXED_NOTE, SandboxMode
from orchard.lab.start import recorded_start, start
from orchard.lab.state import LabState
from orchard.lab.verdicts import MeasureProgress, measure, opportunities
from orchard.lab.workspace import WorkerCheckout, Workspace

POLL_S = 0.5
# Tests only: `after-launch` makes orchard SIGKILL itself between starting a worker and recording it.
KILL_AT = "ORCHARD_TEST_KILL_AT"
STOPPED_BY_LAB = "worker-stopped-by-lab"  # the journal's record that a worker was killed by the lab's own stop
Say = Callable[[str], None]
Status = ExperimentStatus


@dataclass(frozen=True)
class Slot:
    worker: str
    lane: Lane


def slots(ws: Workspace) -> list[Slot]:
    """Worker names and their lanes: exploit lanes first, then explore."""
    workers = ws.config.workers
    return [Slot(f"w{i + 1}", Lane.EXPLOIT if i < workers.exploit else Lane.EXPLORE) for i in range(workers.count)]


class Lab:
    def __init__(self, ws: Workspace, state: LabState, *, say: Say = print,
                 measure_progress: MeasureProgress | None = None) -> None:
        self.ws = ws
        self.state = state
        self.say = say
        self.measure_progress = measure_progress
        self.launchers: dict[str, Launcher] = {}
        self.down: set[str] = set()  # launchers whose agent could not work in this run: given no more work
        self.executor: Executor | DaskExecutor | None = None
        self.started = time.time()
        self._pool: ThreadPoolExecutor | None = None
        self._judging: dict[str, Future[Judgment]] = {}
        self._landing: dict[str, Future[landing.LandOutcome]] = {}
        self._one_landing = threading.Lock()  # merges into main are serial
        self._planner: Executor | None = None  # the refill planner's own executor (never the workers')
        self._plan: planner.PlanRun | None = None
        self._refill_failed = False
        self.deferred: set[str] = set()  # hypotheses whose launch failed in this run: back in the backlog, not retried

    def _failed(self, record: ExperimentRecord, stage: Stage, error: BaseException) -> None:
        """One experiment failed (see lab/isolation.py): record why and go on, unless the lab itself failed."""
        if lab_wide(error) or self.state.experiment(record.name).status in (Status.LANDING, Status.DONE):
            raise error  # the lab's own failure, or one after the experiment's end was recorded
        if isinstance(self.executor, Executor) and record.name in self.executor.running():
            self.executor.cancel(record.name, f"its {stage} failed")
        reason = end_experiment(self.state, record, stage, error, self.ws.config.workers.count)
        if stage == Stage.LAUNCH:
            self.deferred.add(record.hypothesis)
        shutil.rmtree(self.ws.judge_dir / record.name, ignore_errors=True)
        self.say(f"{record.name}: {reason}")
        self.render()

    def render(self) -> None:
        records.write_notebook(self.ws.root, self.state)

    # -- assigning -------------------------------------------------------------------

    def _experiment(self, record: ExperimentRecord) -> Experiment:
        hypothesis = self.state.hypothesis(record.hypothesis).hypothesis
        checkout = WorkerCheckout(self.ws.worker(record.worker), record.target_base, record.bench_base)
        return Experiment(record.name, hypothesis, checkout)

    def _launcher(self, record: ExperimentRecord) -> Launcher:
        """The launcher the experiment's hypothesis names (the lab's default when it names none)."""
        name = self.state.hypothesis(record.hypothesis).hypothesis.launcher
        if name not in self.launchers:
            self.launchers[name] = launcher_for(self.ws.config, name)
        return self.launchers[name]

    def _blocked(self) -> set[str]:
        """Open hypotheses whose launcher, or their own launch, failed in this run."""
        return {r.id for r in self.state.hypotheses(HypothesisStatus.OPEN)
                if r.hypothesis.launcher in self.down or r.id in self.deferred}

    def _name(self, hypothesis_id: str) -> str:
        attempts = self.state.hypothesis(hypothesis_id).attempts
        return hypothesis_id if attempts == 0 else f"{hypothesis_id}-{attempts + 1}"

    def _launch(self, record: ExperimentRecord) -> None:
        """Start the experiment's worker; a failure re-queues its hypothesis and the lab goes on."""
        try:
            self._start_worker(record)
        except Exception as error:
            self._failed(record, Stage.LAUNCH, error)

    def _start_worker(self, record: ExperimentRecord) -> None:
        """Give the worker clean checkouts at the recorded bases, render its prompt, start it.

        The experiment is recorded STARTING before this runs: that record names the worker's job (its
        tmux window, its subprocess's mark), so an orchard killed before it records RUNNING is resumed
        by adopting the job it started, never by starting a second one.
        """
        assert self.executor is not None
        if isinstance(self.executor, DaskExecutor):
            self._launch_remote(self.executor, record)
            return
        ws = self.ws
        baseline = baseline_binary(ws, self.state, record.target_base)
        launcher = self._launcher(record)
        checkout = ws.setup_worker(record.worker, target_base=record.target_base, bench_base=record.bench_base,
                                   ignore=launcher.scratch)
        give_baseline(ws, checkout.worker, baseline)  # the worker measures against its own copy
        experiment = self._experiment(record)
        prompt = render_prompt(ws, experiment)
        ws.log_path(record.name).unlink(missing_ok=True)
        self.executor.start(launcher.job(ws, experiment))
        if os.environ.get(KILL_AT) == "after-launch":
            os.kill(os.getpid(), signal.SIGKILL)
        self.state.update_experiment(record.name, status=Status.RUNNING)
        self.state.log("experiment-start", {"hypothesis": record.hypothesis, "worker": record.worker,
                                            "lane": record.lane, "base": record.target_base,
                                            "launcher": launcher.label, "title": experiment.hypothesis.title,
                                            "prompt": str(prompt),
                                            "log": str(ws.log_path(record.name))}, record.name)
        self.say(f"{record.name}: started on worker {record.worker} ({record.lane} lane, launcher {launcher.label})")

    def _launch_remote(self, executor: DaskExecutor, record: ExperimentRecord) -> None:
        """Submit the experiment as a dask task; the dask worker makes its own checkouts and prompt."""
        assert executor.repositories is not None
        experiment = self._experiment(record)
        hypothesis = experiment.hypothesis

        def text(path: str | None) -> str | None:
            found = None if path is None else Path(path) if Path(path).is_absolute() else self.ws.root / path
            return found.read_text(encoding="utf-8") if found is not None and found.is_file() else None

        executor.start(RemoteExperiment(lab_id(self.ws.root), record.name, record.worker, hypothesis,
                                        record.target_base, record.bench_base, executor.repositories,
                                        self.ws.config, text(hypothesis.patch), text(hypothesis.bench_patch)))
        self.state.update_experiment(record.name, status=Status.RUNNING)
        self.state.log("experiment-start", {"hypothesis": record.hypothesis, "worker": record.worker,
                                            "lane": record.lane, "base": record.target_base,
                                            "launcher": self._launcher(record).label,
                                            "title": hypothesis.title, "executor": "dask",
                                            "scheduler": self.ws.config.workers.scheduler,
                                            "log": str(self.ws.log_path(record.name))}, record.name)
        self.say(f"{record.name}: submitted to the dask cluster for worker {record.worker} ({record.lane} lane)")

    def assign(self) -> None:
        running = self.state.experiments(Status.STARTING, Status.RUNNING)
        busy_workers = {e.worker for e in running}
        busy_scopes = [self.state.hypothesis(e.hypothesis).hypothesis.scope for e in running]
        for slot in slots(self.ws):
            if slot.worker in busy_workers:
                continue
            record = backlog.pick(self.state, slot.lane, busy_scopes, skip=self._blocked())
            if record is None:
                continue
            name = self._name(record.id)
            pins.check(self.ws, self.state, publication.main_branch(self.ws, self.state))  # bases come from it
            with self.state.transaction():
                self.state.update_hypothesis(record.id, status=HypothesisStatus.RUNNING, attempt=True)
                self.state.add_experiment(name, record.id, slot.worker, slot.lane,
                                          self.state.counter(stop.LOOP) + 1, self.ws.target_base(),
                                          self.ws.bench_base(), Status.STARTING)
            busy_scopes.append(record.hypothesis.scope)
            self._launch(self.state.experiment(name))

    # -- collecting -------------------------------------------------------------------

    def _collect(self, result: JobResult) -> None:
        record = self.state.experiment(result.name)
        candidate = self._collected(record, lambda: collect_candidate(self.ws, self._experiment(record), result,
                                                                      self._launcher(record)))
        if candidate is not None:
            flags = ", ".join(candidate.flags) or "none"
            self.say(f"{record.name}: worker ended (exit {result.exit_code}); flags: {flags}")

    def _collect_remote(self, outcome: RemoteOutcome) -> None:
        record = self.state.experiment(outcome.name)
        candidate = self._collected(record, lambda: from_remote(self.ws, self._experiment(record), outcome,
                                                                self._launcher(record)))
        if candidate is not None:
            ended = f"exit {outcome.exit_code}" if outcome.error is None else outcome.error
            self.say(f"{record.name}: worker ended on {candidate.host} ({ended}); "
                     f"flags: {', '.join(candidate.flags) or 'none'}")

    def _collected(self, record: ExperimentRecord, read: Callable[[], Candidate]) -> Candidate | None:
        """Read the ended worker's candidate and record it; None when its agent could not work or collection failed."""
        if record.status not in (Status.STARTING, Status.RUNNING):
            return None  # its end is recorded already (its launch failed after the worker started)
        try:
            candidate = read()
            if candidate.launcher_failure is not None and Flag.NO_CHANGES in candidate.flags:
                self._launcher_failed(record, candidate)
                return None
            self.state.update_experiment(record.name, status=Status.COLLECTED, candidate=candidate,
                                         finished_at=time.time())
            return candidate
        except Exception as error:
            self._failed(record, Stage.COLLECT, error)
            return None

    def _launcher_failed(self, record: ExperimentRecord, candidate: Candidate) -> None:
        """The agent could not work at all: its own message is the reason, the hypothesis goes back to the backlog."""
        reason = f"launcher {candidate.launcher} failed: {candidate.launcher_failure}"
        with self.state.transaction():
            self.state.update_experiment(record.name, status=Status.DONE, candidate=candidate,
                                         finished_at=time.time(), reasons=[reason])
            self.state.update_hypothesis(record.hypothesis, status=HypothesisStatus.OPEN)
            self.state.log("launcher-failure", {"hypothesis": record.hypothesis, "launcher": candidate.launcher,
                                                "exit_code": candidate.exit_code, "reason": reason,
                                                "log": candidate.log_path}, record.name)
            self.state.set_counter(stop.LAUNCHER_FAILURES, self.state.counter(stop.LAUNCHER_FAILURES) + 1)
        self.down.add(self.state.hypothesis(record.hypothesis).hypothesis.launcher)
        self.say(f"{record.name}: {reason}; {record.hypothesis} goes back to the backlog")
        self.render()

    def collect(self) -> None:
        assert self.executor is not None
        if isinstance(self.executor, DaskExecutor):
            for placement in self.executor.placements():
                self.state.log("experiment-host", {"host": placement.host, "address": placement.address,
                                                   "requeued_from": placement.lost_on}, placement.experiment)
                if placement.lost_on:
                    self.say(f"{placement.experiment}: its dask worker {placement.lost_on} was lost; "
                             f"re-queued on {placement.host} ({placement.address})")
            for outcome in self.executor.poll():
                self._collect_remote(outcome)
            return
        for result in self.executor.poll():
            self._collect(result)

    def _stopped_by_lab(self, record: ExperimentRecord) -> bool:
        """Whether the lab itself stopped this experiment's worker after it last started (never a finished one)."""
        kinds = [e.kind for e in self.state.events() if e.experiment == record.name
                 and e.kind in ("experiment-start", STOPPED_BY_LAB)]
        return bool(kinds) and kinds[-1] == STOPPED_BY_LAB

    @contextlib.contextmanager
    def _stopping(self) -> Iterator[None]:
        """A run that ends early records, before the executor kills them, that its running workers were stopped."""
        try:
            yield
        except BaseException as error:
            for record in self.state.experiments(Status.RUNNING):
                self.state.log(STOPPED_BY_LAB, {"why": f"orchard run stopped ({type(error).__name__})",
                                                "worker": record.worker}, record.name)
            raise

    def resume_workers(self) -> None:
        """Experiments an earlier orchard left running: adopt, collect, or start again."""
        assert self.executor is not None
        for record in self.state.experiments(Status.STARTING, Status.RUNNING):
            if record.status == Status.RUNNING and self._stopped_by_lab(record):
                self.say(f"{record.name}: the lab stopped its worker last time; starting it again from clean")
                self._launch(record)
                continue
            if isinstance(self.executor, DaskExecutor):
                # its task went with the previous orchard's cluster connection: submit it again
                self.say(f"{record.name}: submitted again (the previous orchard's dask task is gone)")
                self._launch(record)
                continue
            job = self._launcher(record).job(self.ws, self._experiment(record))
            # a STARTING one too: the previous orchard may have died right after launching it
            if self.executor.adopt(job):
                self.state.update_experiment(record.name, status=Status.RUNNING)
                self.say(f"{record.name}: still running ({self.executor.kind}); watching it again")
                continue
            ended = self.executor.ended_earlier(job)  # its log is new with each launch: this launch's end
            if ended is not None:
                self._collect(ended)
            elif record.status == Status.STARTING:
                self._launch(record)
            else:
                self.say(f"{record.name}: its worker died with the previous orchard; starting it again")
                self._launch(record)

    # -- judging ------------------------------------------------------------------------

    def _judge_job(self, name: str) -> Judgment:
        """A judge thread: judge one candidate from clean, with its own lab.db connection."""
        state = LabState.open(self.ws.root)
        try:
            record = state.experiment(name)
            assert record.candidate is not None
            return judge(self.ws, state, record.name, record.candidate, record.target_base, record.bench_base,
                         progress=self.say, measure_progress=self.measure_progress)
        finally:
            state.close()

    def _land_job(self, name: str, judgment: Judgment) -> landing.LandOutcome:
        """A landing thread: one at a time, since each merge moves main."""
        with self._one_landing:
            state = LabState.open(self.ws.root)
            try:
                record = state.experiment(name)
                hypothesis = state.hypothesis(record.hypothesis).hypothesis
                return landing.land(self.ws, state, record, judgment, hypothesis, progress=self.say,
                                    measure_progress=self.measure_progress)
            finally:
                state.close()

    def dispatch(self) -> None:
        """Hand every decided win to the landing thread and collected candidates to free judge threads."""
        assert self._pool is not None
        for record in self.state.experiments(Status.LANDING):
            if record.name not in self._landing:
                assert record.judgment is not None
                self._landing[record.name] = self._pool.submit(self._land_job, record.name, record.judgment)
        for record in self.state.experiments(Status.JUDGING, Status.COLLECTED):
            if record.name in self._judging:
                continue
            if len(self._judging) >= self.ws.config.workers.judges:
                break
            self.state.update_experiment(record.name, status=Status.JUDGING)
            self.say(f"{record.name}: judging")
            self._judging[record.name] = self._pool.submit(self._judge_job, record.name)

    def harvest(self) -> bool:
        """Record the judgments and landings that finished; False when none did."""
        finished = False
        for name, judged in list(self._judging.items()):
            if judged.done():
                del self._judging[name]
                record = self.state.experiment(name)
                stage = Stage.JUDGE
                try:
                    judgment = judged.result()
                    stage = Stage.RECORD
                    self._decide(record, judgment)
                except Exception as error:
                    self._failed(record, stage, error)
                finished = True
        for name, landed in list(self._landing.items()):
            if landed.done():
                del self._landing[name]
                self._landed(self.state.experiment(name), landed.result())
                finished = True
        return finished

    def _decide(self, record: ExperimentRecord, judgment: Judgment) -> None:
        entry = self.state.hypothesis(record.hypothesis)
        hypothesis = entry.hypothesis
        status = Status.LANDING if judgment.decision == Decision.LAND else Status.DONE
        event = JudgmentEntry(
            hypothesis=hypothesis.id, title=hypothesis.title, decision=judgment.decision, reasons=judgment.reasons,
            metric=hypothesis.metric, predicted=hypothesis.predicted_text, cause=hypothesis.suspected_cause,
            rule=judgment.rule, verdict=judgment.verdict, checks=judgment.check_lines(),
            usage=None if record.candidate is None else record.candidate.usage.to_dict(),
            sandbox=self.ws.config.workers.sandbox)
        with self.state.transaction():
            self.state.update_experiment(record.name, status=status, judgment=judgment,
                                         decision=judgment.decision, reasons=judgment.reasons)
            self.state.log("judgment", event.to_dict(), record.name)
            if judgment.decision == Decision.KILL:
                self.state.update_hypothesis(hypothesis.id, status=HypothesisStatus.KILLED)
                lowered = backlog.learn_from_kill(self.state, entry)
                if lowered:
                    self.state.log("backlog", {"lowered confidence": lowered,
                                               "because": f"{hypothesis.id} was killed"}, record.name)
            elif judgment.decision == Decision.ITERATE:
                self.state.update_hypothesis(hypothesis.id, status=HypothesisStatus.ITERATED)
                child = backlog.sharpen(self.state, hypothesis, judgment.reasons)
                self.state.add_hypothesis(child, source="iterate", parent=hypothesis.id)
            else:
                self.state.update_hypothesis(hypothesis.id, status=HypothesisStatus.LANDED)
            stop.count_judged(self.state, self.ws.config.workers.count, judgment.decision == Decision.LAND)
            self.state.set_counter(stop.LAUNCHER_FAILURES, 0)  # a worker that worked ends a run of launcher failures
        self.say(f"{record.name}: {judgment.decision}: {'; '.join(judgment.reasons)[:300]}")
        if judgment.checkout and judgment.decision != Decision.LAND:
            shutil.rmtree(judgment.checkout, ignore_errors=True)
        self.render()

    def _landed(self, record: ExperimentRecord, outcome: landing.LandOutcome) -> None:
        reasons = list(record.reasons) + outcome.notes
        won = outcome.merged and not outcome.reverted
        with self.state.transaction():
            self.state.update_experiment(record.name, status=Status.DONE, branch=outcome.branch,
                                         land_commit=outcome.commit, merge_commit=outcome.merge_commit,
                                         reasons=reasons)
            if won:
                self.state.set_counter(stop.MERGED, self.state.counter(stop.MERGED) + 1)
        merged = "branch kept, not merged"
        if won:
            merged = "merged into main" + ("" if outcome.published else ", NOT published to the target")
        self.say(f"{record.name}: landed on {outcome.branch} ({merged})")
        self.render()
        if won:
            self._after_win()

    def _after_win(self) -> None:
        """Re-read the opportunities; every few wins, run the full sweep."""
        items = opportunities(self.ws)
        self.state.log(
            "opportunities",
            {
                "items": len(items),
                "top": [
                    f"{i['scenario']}/{i['operation']} {i['metric']}: {i['subject']} vs {i['comparator']} "
                    f"gap {i['gap']}"
                    for i in items[:3]
                ],
            },
        )
        if self.state.counter(stop.MERGED) % self.ws.config.bench.sweep_every == 0:
            self._sweep()

    def _sweep(self) -> None:
        ws = self.ws
        main = ws.target_base()
        self.say(f"full sweep: main {main[:12]} against the lab's first baseline")
        started = recorded_start(self.state)
        first = baseline_binary(ws, self.state, started.base if started else main)
        verdict = measure(ws, first, baseline_binary(ws, self.state, main), progress=self.measure_progress)
        data: dict[str, Any] = {"main": main, "verdict": verdict.to_dict()}
        if ws.config.bench.sweep:
            values = placeholders(ws, ws.reference_target, baseline_binary(ws, self.state, main).path)
            check = run_step("sweep", ws.config.bench.sweep, ws.bench_dir, values, ws.judge_dir / "sweep-logs")
            data["command"] = check.detail
            data["command_log"] = check.log
        self.state.log("sweep", data)
        self.render()

    # -- refilling the backlog ------------------------------------------------------------

    def refill(self) -> None:
        """Start the planner when open hypotheses fall below the free workers (once at a time)."""
        if self._planner is None or self._plan is not None or self._refill_failed:
            return
        busy = {e.worker for e in self.state.experiments(Status.STARTING, Status.RUNNING)}
        free = sum(1 for slot in slots(self.ws) if slot.worker not in busy)
        if len(self.state.hypotheses(HypothesisStatus.OPEN)) >= free:
            return
        try:
            self._plan = planner.start_plan(self.ws, self.state, self._planner, say=self.say)
        except OrchardError as error:
            self._refill_stopped(str(error))

    def collect_plan(self) -> None:
        """Add a finished planner's hypotheses; a rejected answer stops refilling for this run."""
        run = self._plan
        if self._planner is None or run is None:
            return
        for result in self._planner.poll():
            try:
                added = planner.finish_plan(self.ws, self.state, run, result)
                self.say(f"planner {run.name}: added {', '.join(h.id for h in added)}")
            except OrchardError as error:
                self._refill_stopped(str(error))
            self._plan = None

    def _refill_stopped(self, why: str) -> None:
        self._refill_failed = True
        self.state.log("refill", {"stopped": why})
        self.say(f"backlog refill stopped for this run: {why}")

    # -- the loop ----------------------------------------------------------------------------

    def finish(self, reason: str) -> None:
        stop.final_verdict(self.ws, self.state, say=self.say, measure_progress=self.measure_progress)
        stop.log_stop(self.state, reason)
        records.write_notebook(self.ws.root, self.state, final=True)
        self.say(f"stopped: {reason}; wrote {self.ws.root / 'FINAL_REPORT.md'}")

    def preflight(self) -> None:
        """Before anything is touched: every launcher runs, and every open hypothesis names one that exists."""
        preflight(self.ws.config)
        for record in self.state.hypotheses(HypothesisStatus.OPEN):
            launcher_for(self.ws.config, record.hypothesis.launcher)

    def run(self) -> str:
        """Run until a stop condition holds; returns the reason. A second run on the workspace is refused."""
        with workspace_lock.hold(self.ws.root):
            return self._run()

    def _run(self) -> str:
        self.preflight()
        events = self.state.events()
        if events and events[-1].kind == "stop":
            self.state.set_counter(stop.IDLE_LOOPS, 0)  # a new session after a clean stop starts fresh
        workers = self.ws.config.workers
        self.executor = (DaskExecutor(self.ws) if workers.executor == "dask"
                         else make_executor(workers.executor, self.ws.tmux_socket, self.ws.executor_dir))
        reason: str | None = None
        try:
            with self.executor, self._stopping():
                if self.executor.kind == "subprocess" and workers.executor == "auto":
                    self.say("tmux is not installed: workers run as plain subprocesses")
                if workers.sandbox == SandboxMode.NONE:
                    self.say(UNSANDBOXED_NOTE)
                publication.check_publication(self.ws, self.state)
                if start(self.ws, self.state, say=self.say, measure_progress=self.measure_progress):
                    self.render()
                self.resume_workers()
                with (ThreadPoolExecutor(max_workers=workers.judges + 1, thread_name_prefix="judge") as pool,
                      SubprocessExecutor() as planner_executor):
                    self._pool = pool
                    self._planner = planner_executor if workers.refill else None
                    while True:
                        self.collect()
                        self.collect_plan()
                        if self.harvest():
                            continue  # a decision changes the backlog and the stop conditions
                        self.refill()
                        reason = stop.stop_reason(self.ws, self.state, self.started, self._blocked(),
                                                  planning=self._plan is not None)
                        if reason is None:
                            self.assign()
                        self.dispatch()
                        if reason is not None and not self.state.experiments(*Status.active()):
                            break
                        time.sleep(POLL_S)
        finally:
            self.executor = None
            self._pool = None
            self._planner = self._plan = None
            self._judging.clear()
            self._landing.clear()
        assert reason is not None
        self.finish(reason)
        return reason
