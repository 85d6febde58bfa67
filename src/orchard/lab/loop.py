"""The research loop: keep the lanes busy, judge what comes back, stop on clear conditions.

One `Lab` drives one workspace. On its first run it anchors everything:
builds the base, checks the harness suite, calibrates the verdict (A/A) and
records the baseline. Then, until a stop condition holds, the loop's one
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
   judge works.

Judge and landing threads open their own lab.db connection; every decision
is recorded by the loop's thread. Every step's outcome is in lab.db before
the next starts, so `orchard run` after a crash (even SIGKILL) resumes:
running workers are adopted again (or collected, or restarted if they died
unseen), half-judged candidates are judged again from clean, half-landed
wins finish landing, and nothing is judged or landed twice.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchard import bench
from orchard.errors import OrchardError, UsageError
from orchard.lab import backlog, judge as judging, land as landing, planner, records
from orchard.lab.candidate import collect_candidate, from_remote
from orchard.lab.executors import DONE_MARKER, Executor, JobResult, SubprocessExecutor, make_executor
from orchard.lab.executors.dask import DaskExecutor
from orchard.lab.experiment import Experiment
from orchard.lab.hypothesis import Hypothesis
from orchard.lab.judge import Check, Judgment
from orchard.lab.launchers import Launcher, make_launcher
from orchard.lab.prompts import render_prompt
from orchard.lab.remote import RemoteExperiment, RemoteOutcome, lab_id
from orchard.lab.state import ExperimentRecord, LabState
from orchard.lab.workspace import WorkerCheckout, Workspace

POLL_S = 0.5
Say = Callable[[str], None]

# experiment statuses
STARTING, RUNNING, COLLECTED, JUDGING, LANDING, DONE = "starting", "running", "collected", "judging", "landing", "done"


@dataclass(frozen=True)
class Slot:
    worker: str
    lane: str


def slots(ws: Workspace) -> list[Slot]:
    """Worker names and their lanes: exploit lanes first, then explore."""
    workers = ws.config.workers
    return [Slot(f"w{i + 1}", "exploit" if i < workers.exploit else "explore") for i in range(workers.count)]


def judgment_from(data: dict[str, Any]) -> Judgment:
    checks = [Check(**c) for c in data.get("checks", [])]
    return Judgment(**{**data, "checks": checks})


class Lab:
    def __init__(self, ws: Workspace, state: LabState, *, say: Say = print,
                 measure_progress: Callable[[int, int, str], None] | None = None) -> None:
        self.ws = ws
        self.state = state
        self.say = say
        self.measure_progress = measure_progress
        self.launcher: Launcher = make_launcher(ws.config.launcher)
        self.executor: Executor | DaskExecutor | None = None
        self.started = time.monotonic()
        self._pool: ThreadPoolExecutor | None = None
        self._judging: dict[str, Future[Judgment]] = {}
        self._landing: dict[str, Future[landing.LandOutcome]] = {}
        self._one_landing = threading.Lock()  # merges into main are serial
        self._planner: Executor | None = None  # the refill planner's own executor (never the workers')
        self._plan: planner.PlanRun | None = None
        self._refill_failed = False

    # -- records ---------------------------------------------------------------

    def render(self) -> None:
        records.write_notebook(self.ws.root, self.state)

    def _counter(self, key: str) -> int:
        return int(self.state.meta(key) or 0)

    # -- the lab's start -----------------------------------------------------------

    def start(self) -> None:
        """Build the base, check the harness, calibrate and measure the baseline (once)."""
        if self.state.meta("started_at") is not None:
            return
        ws, state = self.ws, self.state
        base, bench_base = ws.target_base(), ws.bench_base()
        landing.main_branch(ws, state)
        self.say(f"lab start: base {base[:12]}, bench {bench_base[:12]}")
        values = judging.placeholders(ws, ws.reference_target, None)
        bench_tests = judging.harness_tests(ws, state, bench_base, values, ws.judge_dir / "start-logs")
        if not bench_tests.passed:
            raise OrchardError(f"the harness suite fails at the bench base: {bench_tests.detail}; "
                               "fix the harness before running the lab")
        binary = judging.baseline_binary(ws, state, base)
        suite_path = ws.suite(ws.bench_dir)
        if suite_path is None and ws.config.bench.verdict:
            with state.transaction():
                state.log("lab-start", {"base": base, "bench_base": bench_base, "baseline": {}, "floors": {},
                                        "calibration": "by the bench's own verdict command", "binary": str(binary)})
                state.set_meta("started_at", str(time.time()))
                state.set_meta("first_baseline", str(binary))
            self.render()
            return
        if suite_path is None:
            raise OrchardError("bench.suite is not configured: the lab has nothing to judge with")
        suite = bench.load_suite(suite_path)
        self.say(f"calibrating the verdict (A/A, {suite.calibration_runs} pairs) on this machine")
        cal = bench.calibrate(suite, binary, results=ws.results_dir, progress=self.measure_progress or (lambda *_: None))
        baseline = {key: m.median for key, m in cal.metrics.items()}
        floors = {spec.key: spec.floor(cal.metrics[spec.key].noise()) for spec in suite.metrics
                  if spec.key in cal.metrics}
        state.set_meta("metric_directions", json.dumps({s.key: s.direction for s in suite.metrics}))
        with state.transaction():
            state.add_measurement("baseline", base, baseline)
            state.add_measurement("main", base, baseline)
            state.log("lab-start", {"base": base, "bench_base": bench_base, "baseline": baseline, "floors": floors,
                                    "calibration": f"{cal.runs} A/A pairs, seed {cal.seed}, machine "
                                                   f"{cal.machine_fingerprint}", "binary": str(binary)})
            state.set_meta("started_at", str(time.time()))
            state.set_meta("first_baseline", str(binary))
        self.render()

    # -- assigning -------------------------------------------------------------------

    def _experiment(self, record: ExperimentRecord) -> Experiment:
        hypothesis = Hypothesis.from_dict(self.state.hypothesis(record.hypothesis).data, source=record.hypothesis)
        checkout = WorkerCheckout(self.ws.worker(record.worker), record.target_base, record.bench_base)
        return Experiment(record.name, hypothesis, checkout)

    def _name(self, hypothesis_id: str) -> str:
        attempts = self.state.hypothesis(hypothesis_id).attempts
        return hypothesis_id if attempts == 0 else f"{hypothesis_id}-{attempts + 1}"

    def _launch(self, record: ExperimentRecord) -> None:
        """Give the worker clean checkouts at the recorded bases, render its prompt, start it."""
        assert self.executor is not None
        if isinstance(self.executor, DaskExecutor):
            self._launch_remote(self.executor, record)
            return
        ws = self.ws
        judging.baseline_binary(ws, self.state, record.target_base)  # the worker measures against it
        ws.setup_worker(record.worker, target_base=record.target_base, bench_base=record.bench_base,
                        ignore=self.launcher.scratch)
        experiment = self._experiment(record)
        prompt = render_prompt(ws, experiment)
        ws.log_path(record.name).unlink(missing_ok=True)
        self.executor.start(self.launcher.job(ws, experiment))
        self.state.update_experiment(record.name, status=RUNNING)
        self.state.log("experiment-start", {"hypothesis": record.hypothesis, "worker": record.worker,
                                            "lane": record.lane, "base": record.target_base,
                                            "title": experiment.hypothesis.title, "prompt": str(prompt),
                                            "log": str(ws.log_path(record.name))}, record.name)
        self.say(f"{record.name}: started on worker {record.worker} ({record.lane} lane)")

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
        self.state.update_experiment(record.name, status=RUNNING)
        self.state.log("experiment-start", {"hypothesis": record.hypothesis, "worker": record.worker,
                                            "lane": record.lane, "base": record.target_base,
                                            "title": hypothesis.title, "executor": "dask",
                                            "scheduler": self.ws.config.workers.scheduler,
                                            "log": str(self.ws.log_path(record.name))}, record.name)
        self.say(f"{record.name}: submitted to the dask cluster for worker {record.worker} ({record.lane} lane)")

    def assign(self) -> None:
        running = self.state.experiments(STARTING, RUNNING)
        busy_workers = {e.worker for e in running}
        busy_scopes = [self.state.hypothesis(e.hypothesis).data.get("scope", []) for e in running]
        for slot in slots(self.ws):
            if slot.worker in busy_workers:
                continue
            record = backlog.pick(self.state, slot.lane, busy_scopes)
            if record is None:
                continue
            name = self._name(record.id)
            with self.state.transaction():
                self.state.update_hypothesis(record.id, status=backlog.RUNNING, attempt=True)
                self.state.add_experiment(name, record.id, slot.worker, slot.lane, self._counter("loop") + 1,
                                          self.ws.target_base(), self.ws.bench_base(), STARTING)
            busy_scopes.append(record.data.get("scope", []))
            self._launch(self.state.experiment(name))

    # -- collecting -------------------------------------------------------------------

    def _collect(self, result: JobResult) -> None:
        record = self.state.experiment(result.name)
        candidate = collect_candidate(self.ws, self._experiment(record), result, self.launcher)
        self.state.update_experiment(record.name, status=COLLECTED, candidate=candidate.to_dict(),
                                     finished_at=time.time())
        self.say(f"{record.name}: worker ended (exit {result.exit_code}); flags: {', '.join(candidate.flags) or 'none'}")

    def _collect_remote(self, outcome: RemoteOutcome) -> None:
        record = self.state.experiment(outcome.name)
        candidate = from_remote(self.ws, self._experiment(record), outcome, self.launcher)
        self.state.update_experiment(record.name, status=COLLECTED, candidate=candidate.to_dict(),
                                     finished_at=time.time())
        ended = f"exit {outcome.exit_code}" if outcome.error is None else outcome.error
        self.say(f"{record.name}: worker ended on {candidate.host} ({ended}); "
                 f"flags: {', '.join(candidate.flags) or 'none'}")

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

    def resume_workers(self) -> None:
        """Experiments an earlier orchard left running: adopt, collect, or start again."""
        assert self.executor is not None
        for record in self.state.experiments(STARTING, RUNNING):
            if isinstance(self.executor, DaskExecutor):
                # its task went with the previous orchard's cluster connection: submit it again
                self.say(f"{record.name}: submitted again (the previous orchard's dask task is gone)")
                self._launch(record)
                continue
            if record.status == STARTING:
                self._launch(record)
                continue
            job = self.launcher.job(self.ws, self._experiment(record))
            if self.executor.adopt(job):
                self.say(f"{record.name}: still running in tmux; watching it again")
                continue
            exit_code = _logged_exit(job.log_path)
            if exit_code is not None:
                self._collect(JobResult(record.name, exit_code, None, False, False, "", 0.0, job.log_path,
                                        "collected after a restart"))
            else:
                self.say(f"{record.name}: its worker died with the previous orchard; starting it again")
                self._launch(record)

    # -- judging ------------------------------------------------------------------------

    def _judge_job(self, name: str) -> Judgment:
        """A judge thread: judge one candidate from clean, with its own lab.db connection."""
        state = LabState.open(self.ws.root)
        try:
            record = state.experiment(name)
            return judging.judge(self.ws, state, record.name, record.candidate or {}, record.target_base,
                                 record.bench_base, progress=self.say, measure_progress=self.measure_progress)
        finally:
            state.close()

    def _land_job(self, name: str, judgment: Judgment) -> landing.LandOutcome:
        """A landing thread: one at a time, since each merge moves main."""
        with self._one_landing:
            state = LabState.open(self.ws.root)
            try:
                record = state.experiment(name)
                return landing.land(self.ws, state, record, judgment, state.hypothesis(record.hypothesis).data,
                                    progress=self.say, measure_progress=self.measure_progress)
            finally:
                state.close()

    def dispatch(self) -> None:
        """Hand every decided win to the landing thread and collected candidates to free judge threads."""
        assert self._pool is not None
        for record in self.state.experiments(LANDING):
            if record.name not in self._landing:
                self._landing[record.name] = self._pool.submit(self._land_job, record.name,
                                                               judgment_from(record.judgment or {}))
        for record in self.state.experiments(JUDGING, COLLECTED):
            if record.name in self._judging:
                continue
            if len(self._judging) >= self.ws.config.workers.judges:
                break
            self.state.update_experiment(record.name, status=JUDGING)
            self.say(f"{record.name}: judging")
            self._judging[record.name] = self._pool.submit(self._judge_job, record.name)

    def harvest(self) -> bool:
        """Record the judgments and landings that finished; False when none did."""
        finished = False
        for name, judged in list(self._judging.items()):
            if judged.done():
                del self._judging[name]
                self._decide(self.state.experiment(name), judged.result())
                finished = True
        for name, landed in list(self._landing.items()):
            if landed.done():
                del self._landing[name]
                self._landed(self.state.experiment(name), landed.result())
                finished = True
        return finished

    def _decide(self, record: ExperimentRecord, judgment: Judgment) -> None:
        hypothesis = self.state.hypothesis(record.hypothesis)
        data = hypothesis.data
        status = {judging.LAND: LANDING, judging.KILL: DONE, judging.ITERATE: DONE}[judgment.decision]
        event = {"hypothesis": hypothesis.id, "title": data.get("title", ""), "metric": data.get("metric"),
                 "predicted": None if data.get("predicted_effect") is None else f"{data['predicted_effect']:+.0%}",
                 "cause": data.get("suspected_cause"), "decision": judgment.decision, "reasons": judgment.reasons,
                 "rule": judgment.rule, "verdict": judgment.verdict,
                 "checks": [f"{c.name}: {'ok' if c.passed else 'FAILED'} {c.detail}" for c in judgment.checks],
                 "usage": (record.candidate or {}).get("usage")}
        with self.state.transaction():
            self.state.update_experiment(record.name, status=status, judgment=judgment.to_dict(),
                                         decision=judgment.decision, reasons=judgment.reasons)
            self.state.log("judgment", event, record.name)
            if judgment.decision == judging.KILL:
                self.state.update_hypothesis(hypothesis.id, status=backlog.KILLED)
                lowered = backlog.learn_from_kill(self.state, hypothesis)
                if lowered:
                    self.state.log("backlog", {"lowered confidence": lowered,
                                               "because": f"{hypothesis.id} was killed"}, record.name)
            elif judgment.decision == judging.ITERATE:
                self.state.update_hypothesis(hypothesis.id, status=backlog.ITERATED)
                child = self._sharpened(hypothesis.id, data, judgment)
                self.state.add_hypothesis(child["id"], child, source="iterate", parent=hypothesis.id)
            else:
                self.state.update_hypothesis(hypothesis.id, status=backlog.LANDED)
            self._count_judged(judgment.decision == judging.LAND)
        self.say(f"{record.name}: {judgment.decision}: {'; '.join(judgment.reasons)[:300]}")
        if judgment.checkout and judgment.decision != judging.LAND:
            shutil.rmtree(judgment.checkout, ignore_errors=True)
        self.render()

    def _sharpened(self, parent: str, data: dict[str, Any], judgment: Judgment) -> dict[str, Any]:
        # "-r<n>": the n-th sharpening of the original; the first number not yet taken
        root = re.sub(r"-r\d+$", "", parent)[:44]
        n = 1
        while self.state.has_hypothesis(f"{root}-r{n}"):
            n += 1
        child = dict(data)
        child["id"] = f"{root}-r{n}"
        child["title"] = f"{data.get('title', parent)} (sharpened)"
        child["confidence"] = round(float(data.get("confidence", 0.5)) * 0.9, 4)
        child["notes"] = (data.get("notes", "") + f"\nlearned from {parent}: " + "; ".join(judgment.reasons)).strip()
        return child

    def _count_judged(self, landed: bool) -> None:
        """A loop is one round of `workers.count` judgments; count the idle ones in a row."""
        judged = self._counter("judged") + 1
        landed_in_loop = self._counter("landed_in_loop") + int(landed)
        self.state.set_meta("judged", str(judged))
        self.state.set_meta("landed_in_loop", str(landed_in_loop))
        if judged % self.ws.config.workers.count == 0:
            self.state.set_meta("loop", str(self._counter("loop") + 1))
            idle = 0 if landed_in_loop else self._counter("idle_loops") + 1
            self.state.set_meta("idle_loops", str(idle))
            self.state.set_meta("landed_in_loop", "0")

    def _landed(self, record: ExperimentRecord, outcome: landing.LandOutcome) -> None:
        reasons = list(record.reasons) + outcome.notes
        with self.state.transaction():
            self.state.update_experiment(record.name, status=DONE, branch=outcome.branch,
                                         land_commit=outcome.commit, merge_commit=outcome.merge_commit,
                                         reasons=reasons)
            if outcome.merged and not outcome.reverted:
                self.state.set_meta("merged", str(self._counter("merged") + 1))
        merged = "merged into main" if outcome.merged and not outcome.reverted else "branch kept, not merged"
        self.say(f"{record.name}: landed on {outcome.branch} ({merged})")
        self.render()
        if outcome.merged and not outcome.reverted:
            self._after_win()

    def _after_win(self) -> None:
        """Re-read the opportunities; every few wins, run the full sweep."""
        items = self._opportunities()
        self.state.log("opportunities", {"items": len(items), "top": [
            f"{i['scenario']}/{i['operation']} {i['metric']}: {i['subject']} vs {i['comparator']} gap {i['gap']}"
            for i in items[:3]]})
        merged = self._counter("merged")
        if merged % self.ws.config.bench.sweep_every == 0:
            self._sweep()

    def _opportunities(self) -> list[dict[str, Any]]:
        from orchard.bench.opportunities import rank

        return list(rank(self.ws.results_dir).get("items", []))

    def _sweep(self) -> None:
        ws = self.ws
        main = ws.target_base()
        self.say(f"full sweep: main {main[:12]} against the lab's first baseline")
        first = Path(self.state.meta("first_baseline") or "")
        verdict = judging.measure(ws, first, judging.baseline_binary(ws, self.state, main),
                                  progress=self.measure_progress)
        data: dict[str, Any] = {"main": main, "verdict": verdict}
        if ws.config.bench.sweep:
            values = judging.placeholders(ws, ws.reference_target, judging.baseline_binary(ws, self.state, main))
            check = judging.run_step("sweep", ws.config.bench.sweep, ws.bench_dir, values, ws.judge_dir / "sweep-logs")
            data["command"] = check.detail
            data["command_log"] = check.log
        self.state.log("sweep", data)
        self.render()

    # -- refilling the backlog ------------------------------------------------------------

    def refill(self) -> None:
        """Start the planner when open hypotheses fall below the free workers (once at a time)."""
        if self._planner is None or self._plan is not None or self._refill_failed:
            return
        busy = {e.worker for e in self.state.experiments(STARTING, RUNNING)}
        free = sum(1 for slot in slots(self.ws) if slot.worker not in busy)
        if len(self.state.hypotheses(backlog.OPEN)) >= free:
            return
        try:
            self._plan = planner.start_plan(self.ws, self.state, self._planner, say=self.say)
        except (UsageError, OrchardError) as error:
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

    # -- stopping ------------------------------------------------------------------------

    def stop_reason(self) -> str | None:
        stop = self.ws.config.stop
        experiments = self.state.experiments()
        planning = self._plan is not None  # the backlog is about to grow
        if not planning and backlog.top_attempted(self.state, stop.top_attempted):
            return f"the top {stop.top_attempted} backlog items have all been attempted"
        if self._counter("idle_loops") >= stop.idle_loops:
            return f"{stop.idle_loops} consecutive loops landed nothing"
        if stop.max_experiments and len(experiments) >= stop.max_experiments:
            return f"the budget of {stop.max_experiments} experiments is spent"
        if stop.max_wall_minutes and (time.monotonic() - self.started) / 60 >= stop.max_wall_minutes:
            return f"the wall-time budget of {stop.max_wall_minutes:g} minutes is spent"
        cost = sum(float(((e.candidate or {}).get("usage") or {}).get("cost_usd") or 0) for e in experiments)
        if stop.max_cost_usd and cost >= stop.max_cost_usd:
            return f"the agent cost budget of ${stop.max_cost_usd:g} is spent (${cost:.2f})"
        recent = [e.judgment.get("verdict") or {} for e in experiments[-self.ws.config.workers.count:] if e.judgment]
        waited_ms = sum(float(verdict.get("lock_wait_ms") or 0.0) for verdict in recent)
        if waited_ms / 60000 >= stop.lock_wait_minutes:
            return "sustained lock contention makes verdicts unreliable"
        active = self.state.experiments(STARTING, RUNNING, COLLECTED, JUDGING, LANDING)
        if not planning and not self.state.hypotheses(backlog.OPEN) and not active:
            return "the backlog is empty"
        return None

    def finish(self, reason: str) -> None:
        self.state.log("stop", {"reason": reason})
        records.write_notebook(self.ws.root, self.state, final=True)
        self.say(f"stopped: {reason}; wrote {self.ws.root / 'FINAL_REPORT.md'}")

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> str:
        """Run until a stop condition holds; returns the reason."""
        events = self.state.events()
        if events and events[-1]["kind"] == "stop":
            self.state.set_meta("idle_loops", "0")  # a new session after a clean stop starts fresh
        workers = self.ws.config.workers
        self.executor = (DaskExecutor(self.ws) if workers.executor == "dask"
                         else make_executor(workers.executor, self.ws.tmux_socket, self.ws.executor_dir))
        try:
            with self.executor:
                if self.executor.kind == "subprocess" and self.ws.config.workers.executor == "auto":
                    self.say("tmux is not installed: workers run as plain subprocesses")
                self.start()
                self.resume_workers()
                reason: str | None = None
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
                        reason = self.stop_reason()
                        if reason is None:
                            self.assign()
                        self.dispatch()
                        active = self.state.experiments(STARTING, RUNNING, COLLECTED, JUDGING, LANDING)
                        if reason is not None and not active:
                            break
                        time.sleep(POLL_S)
        finally:
            self.executor = None
            self._pool = None
            self._planner = self._plan = None
            self._judging.clear()
            self._landing.clear()
        self.finish(reason)
        return reason


def _logged_exit(log: Path) -> int | None:
    """The exit code the wrapper wrote as its last line, if the worker got that far."""
    if not log.exists():
        return None
    lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    for line in reversed(lines[-5:]):
        if line.startswith(DONE_MARKER) and line[len(DONE_MARKER):].isdigit():
            return int(line[len(DONE_MARKER):])
    return None
