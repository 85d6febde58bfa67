"""The research loop: keep the lanes busy, judge what comes back, stop on clear conditions.

One `Lab` drives one workspace. On its first run it anchors everything
(`start`). Then, until a stop condition holds (`stop`):

1. assign: each free worker takes the best open hypothesis of its lane whose
   scope is disjoint from every running experiment's;
2. collect: a finished worker's candidate (diff against its base, bench
   untouched, scope kept, report, cost) goes into lab.db;
3. judge, one candidate at a time (measurements serialize on the lock while
   other workers keep running), and decide LAND, KILL or ITERATE;
4. record: the journal, leaderboard and backlog are rendered again; after a
   landed win the opportunities are re-read, and every few wins the full
   sweep runs.

Every step's outcome is in lab.db before the next starts, so `orchard run`
after a crash (even SIGKILL) resumes: running workers are adopted again (or
collected, or restarted if they died unseen), half-judged candidates are
judged again from clean, half-landed wins finish landing, and nothing is
judged or landed twice.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchard.lab import backlog, records, stop
from orchard.lab import land as landing
from orchard.lab.builds import baseline_binary, placeholders, run_step
from orchard.lab.candidate import Candidate, Flag, collect_candidate
from orchard.lab.executors import Executor, JobResult, make_executor
from orchard.lab.experiment import Experiment, ExperimentStatus
from orchard.lab.hypothesis import HypothesisStatus, Lane
from orchard.lab.judge import judge
from orchard.lab.judgment import Decision, Judgment, JudgmentEntry
from orchard.lab.launchers import Launcher, launcher_for, preflight
from orchard.lab.prompts import render_prompt
from orchard.lab.start import start
from orchard.lab.state import ExperimentRecord, LabState
from orchard.lab.verdicts import MeasureProgress, measure, opportunities
from orchard.lab.workspace import WorkerCheckout, Workspace

POLL_S = 0.5
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
        self.executor: Executor | None = None
        self.started = time.time()

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
        """Open hypotheses whose launcher failed in this run."""
        return {r.id for r in self.state.hypotheses(HypothesisStatus.OPEN) if r.hypothesis.launcher in self.down}

    def _name(self, hypothesis_id: str) -> str:
        attempts = self.state.hypothesis(hypothesis_id).attempts
        return hypothesis_id if attempts == 0 else f"{hypothesis_id}-{attempts + 1}"

    def _launch(self, record: ExperimentRecord) -> None:
        """Give the worker clean checkouts at the recorded bases, render its prompt, start it."""
        assert self.executor is not None
        ws = self.ws
        baseline_binary(ws, self.state, record.target_base)  # the worker measures against it
        launcher = self._launcher(record)
        ws.setup_worker(record.worker, target_base=record.target_base, bench_base=record.bench_base,
                        ignore=launcher.scratch)
        experiment = self._experiment(record)
        prompt = render_prompt(ws, experiment)
        ws.log_path(record.name).unlink(missing_ok=True)
        self.executor.start(launcher.job(ws, experiment))
        self.state.update_experiment(record.name, status=Status.RUNNING)
        self.state.log("experiment-start", {"hypothesis": record.hypothesis, "worker": record.worker,
                                            "lane": record.lane, "base": record.target_base,
                                            "launcher": launcher.label, "title": experiment.hypothesis.title,
                                            "prompt": str(prompt),
                                            "log": str(ws.log_path(record.name))}, record.name)
        self.say(f"{record.name}: started on worker {record.worker} ({record.lane} lane, launcher {launcher.label})")

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
        candidate = collect_candidate(self.ws, self._experiment(record), result, self._launcher(record))
        if candidate.launcher_failure is not None and Flag.NO_CHANGES in candidate.flags:
            self._launcher_failed(record, candidate)
            return
        self.state.update_experiment(record.name, status=Status.COLLECTED, candidate=candidate,
                                     finished_at=time.time())
        flags = ", ".join(candidate.flags) or "none"
        self.say(f"{record.name}: worker ended (exit {result.exit_code}); flags: {flags}")

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
        for result in self.executor.poll():
            self._collect(result)

    def resume_workers(self) -> None:
        """Experiments an earlier orchard left running: adopt, collect, or start again."""
        assert self.executor is not None
        for record in self.state.experiments(Status.STARTING, Status.RUNNING):
            if record.status == Status.STARTING:
                self._launch(record)
                continue
            job = self._launcher(record).job(self.ws, self._experiment(record))
            if self.executor.adopt(job):
                self.say(f"{record.name}: still running in tmux; watching it again")
                continue
            ended = self.executor.ended_earlier(job)
            if ended is not None:
                self._collect(ended)
            else:
                self.say(f"{record.name}: its worker died with the previous orchard; starting it again")
                self._launch(record)

    # -- judging ------------------------------------------------------------------------

    def judge_next(self) -> bool:
        """Judge (or finish landing) one experiment; False when there is none."""
        pending = self.state.experiments(Status.LANDING) or self.state.experiments(Status.JUDGING, Status.COLLECTED)
        if not pending:
            return False
        record = pending[0]
        if record.status == Status.LANDING:
            assert record.judgment is not None
            self._land(record, record.judgment)
            return True
        assert record.candidate is not None
        self.state.update_experiment(record.name, status=Status.JUDGING)
        self.say(f"{record.name}: judging")
        judgment = judge(self.ws, self.state, record.name, record.candidate, record.target_base,
                         record.bench_base, progress=self.say, measure_progress=self.measure_progress)
        self._decide(record, judgment)
        return True

    def _decide(self, record: ExperimentRecord, judgment: Judgment) -> None:
        entry = self.state.hypothesis(record.hypothesis)
        hypothesis = entry.hypothesis
        status = Status.LANDING if judgment.decision == Decision.LAND else Status.DONE
        event = JudgmentEntry(
            hypothesis=hypothesis.id, title=hypothesis.title, decision=judgment.decision, reasons=judgment.reasons,
            metric=hypothesis.metric, predicted=hypothesis.predicted_text, cause=hypothesis.suspected_cause,
            rule=judgment.rule, verdict=judgment.verdict, checks=judgment.check_lines(),
            usage=None if record.candidate is None else record.candidate.usage.to_dict())
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
        if judgment.decision == Decision.LAND:
            self._land(self.state.experiment(record.name), judgment)

    def _land(self, record: ExperimentRecord, judgment: Judgment) -> None:
        hypothesis = self.state.hypothesis(record.hypothesis).hypothesis
        outcome = landing.land(self.ws, self.state, record, judgment, hypothesis, progress=self.say,
                               measure_progress=self.measure_progress)
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
        first = Path(self.state.meta("first_baseline") or "")
        verdict = measure(ws, first, baseline_binary(ws, self.state, main), progress=self.measure_progress)
        data: dict[str, Any] = {"main": main, "verdict": verdict.to_dict()}
        if ws.config.bench.sweep:
            values = placeholders(ws, ws.reference_target, baseline_binary(ws, self.state, main))
            check = run_step("sweep", ws.config.bench.sweep, ws.bench_dir, values, ws.judge_dir / "sweep-logs")
            data["command"] = check.detail
            data["command_log"] = check.log
        self.state.log("sweep", data)
        self.render()

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
        """Run until a stop condition holds; returns the reason."""
        self.preflight()
        events = self.state.events()
        if events and events[-1].kind == "stop":
            self.state.set_counter(stop.IDLE_LOOPS, 0)  # a new session after a clean stop starts fresh
        self.executor = make_executor(self.ws.config.workers.executor, self.ws.tmux_socket, self.ws.executor_dir)
        reason: str | None = None
        try:
            with self.executor:
                if self.executor.kind == "subprocess" and self.ws.config.workers.executor == "auto":
                    self.say("tmux is not installed: workers run as plain subprocesses")
                landing.check_publication(self.ws, self.state)
                if start(self.ws, self.state, say=self.say, measure_progress=self.measure_progress):
                    self.render()
                self.resume_workers()
                while True:
                    self.collect()
                    if self.judge_next():
                        continue
                    reason = stop.stop_reason(self.ws, self.state, self.started, self._blocked())
                    if reason is None:
                        self.assign()
                    elif not self.state.experiments(*Status.active()):
                        break
                    time.sleep(POLL_S)
        finally:
            self.executor = None
        assert reason is not None
        self.finish(reason)
        return reason
