"""The research loop: keep the lanes busy, judge what comes back, stop on clear conditions.

One `Lab` drives one workspace. On its first run it anchors everything:
builds the base, checks the harness suite, calibrates the verdict (A/A) and
records the baseline. Then, until a stop condition holds:

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

import json
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchard import bench
from orchard.errors import OrchardError
from orchard.lab import backlog, records
from orchard.lab import judge as judging
from orchard.lab import land as landing
from orchard.lab.candidate import NO_CHANGES, Candidate, collect_candidate
from orchard.lab.executors import DONE_MARKER, Executor, JobResult, make_executor
from orchard.lab.experiment import Experiment
from orchard.lab.hypothesis import Hypothesis, predicted_text
from orchard.lab.judge import Judgment
from orchard.lab.launchers import Launcher, launcher_for, preflight
from orchard.lab.prompts import render_prompt
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


class Lab:
    def __init__(self, ws: Workspace, state: LabState, *, say: Say = print,
                 measure_progress: Callable[[int, int, str], None] | None = None) -> None:
        self.ws = ws
        self.state = state
        self.say = say
        self.measure_progress = measure_progress
        self.launchers: dict[str, Launcher] = {}
        self.down: set[str] = set()  # launchers whose agent could not work in this run: given no more work
        self.executor: Executor | None = None
        self.started = time.time()

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

    def _launcher(self, record: ExperimentRecord) -> Launcher:
        """The launcher the experiment's hypothesis names (the lab's default when it names none)."""
        name = str(self.state.hypothesis(record.hypothesis).data.get("launcher") or "")
        if name not in self.launchers:
            self.launchers[name] = launcher_for(self.ws.config, name)
        return self.launchers[name]

    def _blocked(self) -> set[str]:
        """Open hypotheses whose launcher failed in this run."""
        return {r.id for r in self.state.hypotheses(backlog.OPEN)
                if str(r.data.get("launcher") or "") in self.down}

    def _name(self, hypothesis_id: str) -> str:
        attempts = self.state.hypothesis(hypothesis_id).attempts
        return hypothesis_id if attempts == 0 else f"{hypothesis_id}-{attempts + 1}"

    def _launch(self, record: ExperimentRecord) -> None:
        """Give the worker clean checkouts at the recorded bases, render its prompt, start it."""
        assert self.executor is not None
        ws = self.ws
        judging.baseline_binary(ws, self.state, record.target_base)  # the worker measures against it
        launcher = self._launcher(record)
        ws.setup_worker(record.worker, target_base=record.target_base, bench_base=record.bench_base,
                        ignore=launcher.scratch)
        experiment = self._experiment(record)
        prompt = render_prompt(ws, experiment)
        ws.log_path(record.name).unlink(missing_ok=True)
        self.executor.start(launcher.job(ws, experiment))
        self.state.update_experiment(record.name, status=RUNNING)
        self.state.log("experiment-start", {"hypothesis": record.hypothesis, "worker": record.worker,
                                            "lane": record.lane, "base": record.target_base,
                                            "launcher": launcher.label,
                                            "title": experiment.hypothesis.title, "prompt": str(prompt),
                                            "log": str(ws.log_path(record.name))}, record.name)
        self.say(f"{record.name}: started on worker {record.worker} ({record.lane} lane, launcher {launcher.label})")

    def assign(self) -> None:
        running = self.state.experiments(STARTING, RUNNING)
        busy_workers = {e.worker for e in running}
        busy_scopes = [self.state.hypothesis(e.hypothesis).data.get("scope", []) for e in running]
        for slot in slots(self.ws):
            if slot.worker in busy_workers:
                continue
            record = backlog.pick(self.state, slot.lane, busy_scopes, skip=self._blocked())
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
        candidate = collect_candidate(self.ws, self._experiment(record), result, self._launcher(record))
        if candidate.launcher_failure is not None and NO_CHANGES in candidate.flags:
            self._launcher_failed(record, candidate)
            return
        self.state.update_experiment(record.name, status=COLLECTED, candidate=candidate.to_dict(),
                                     finished_at=time.time())
        self.say(f"{record.name}: worker ended (exit {result.exit_code}); flags: {', '.join(candidate.flags) or 'none'}")

    def _launcher_failed(self, record: ExperimentRecord, candidate: Candidate) -> None:
        """The agent could not work at all: its own message is the reason, the hypothesis goes back to the backlog."""
        reason = f"launcher {candidate.launcher} failed: {candidate.launcher_failure}"
        with self.state.transaction():
            self.state.update_experiment(record.name, status=DONE, candidate=candidate.to_dict(),
                                         finished_at=time.time(), reasons=[reason])
            self.state.update_hypothesis(record.hypothesis, status=backlog.OPEN)
            self.state.log("launcher-failure", {"hypothesis": record.hypothesis, "launcher": candidate.launcher,
                                                "exit_code": candidate.exit_code, "reason": reason,
                                                "log": candidate.log_path}, record.name)
            self.state.set_meta("launcher_failures", str(self._counter("launcher_failures") + 1))
        self.down.add(str(self.state.hypothesis(record.hypothesis).data.get("launcher") or ""))
        self.say(f"{record.name}: {reason}; {record.hypothesis} goes back to the backlog")
        self.render()

    def collect(self) -> None:
        assert self.executor is not None
        for result in self.executor.poll():
            self._collect(result)

    def resume_workers(self) -> None:
        """Experiments an earlier orchard left running: adopt, collect, or start again."""
        assert self.executor is not None
        for record in self.state.experiments(STARTING, RUNNING):
            if record.status == STARTING:
                self._launch(record)
                continue
            job = self._launcher(record).job(self.ws, self._experiment(record))
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

    def judge_next(self) -> bool:
        """Judge (or finish landing) one experiment; False when there is none."""
        pending = self.state.experiments(LANDING) or self.state.experiments(JUDGING, COLLECTED)
        if not pending:
            return False
        record = pending[0]
        if record.status == LANDING:
            self._land(record, judging.judgment_from(record.judgment or {}))
            return True
        self.state.update_experiment(record.name, status=JUDGING)
        self.say(f"{record.name}: judging")
        judgment = judging.judge(self.ws, self.state, record.name, record.candidate or {}, record.target_base,
                                 record.bench_base, progress=self.say, measure_progress=self.measure_progress)
        self._decide(record, judgment)
        return True

    def _decide(self, record: ExperimentRecord, judgment: Judgment) -> None:
        hypothesis = self.state.hypothesis(record.hypothesis)
        data = hypothesis.data
        status = {judging.LAND: LANDING, judging.KILL: DONE, judging.ITERATE: DONE}[judgment.decision]
        event = {"hypothesis": hypothesis.id, "title": data.get("title", ""), "metric": data.get("metric"),
                 "predicted": None if data.get("predicted_effect") is None else predicted_text(data["predicted_effect"]),
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
            self.state.set_meta("launcher_failures", "0")  # a worker that worked ends a run of launcher failures
        self.say(f"{record.name}: {judgment.decision}: {'; '.join(judgment.reasons)[:300]}")
        if judgment.checkout and judgment.decision != judging.LAND:
            shutil.rmtree(judgment.checkout, ignore_errors=True)
        self.render()
        if judgment.decision == judging.LAND:
            self._land(self.state.experiment(record.name), judgment)

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

    def _land(self, record: ExperimentRecord, judgment: Judgment) -> None:
        hypothesis = self.state.hypothesis(record.hypothesis).data
        outcome = landing.land(self.ws, self.state, record, judgment, hypothesis, progress=self.say,
                               measure_progress=self.measure_progress)
        reasons = list(record.reasons) + outcome.notes
        with self.state.transaction():
            self.state.update_experiment(record.name, status=DONE, branch=outcome.branch,
                                         land_commit=outcome.commit, merge_commit=outcome.merge_commit,
                                         reasons=reasons)
            if outcome.merged and not outcome.reverted:
                self.state.set_meta("merged", str(self._counter("merged") + 1))
        merged = "branch kept, not merged"
        if outcome.merged and not outcome.reverted:
            merged = "merged into main" + ("" if outcome.published else ", NOT published to the target")
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

    # -- stopping ------------------------------------------------------------------------

    def stop_reason(self) -> str | None:
        stop = self.ws.config.stop
        experiments = self.state.experiments()
        if backlog.top_attempted(self.state, stop.top_attempted):
            top = min(stop.top_attempted, len(self.state.hypotheses()))
            return f"the top {top} backlog items have all been attempted"
        failures = self._counter("launcher_failures")
        if failures >= stop.launcher_failures:
            last = self.state.events("launcher-failure")[-1]["data"]["reason"]
            return (f"{failures} launcher failures in a row (last: {last}); fix the agent CLI and run again: "
                    "the hypotheses went back to the backlog")
        if self._counter("idle_loops") >= stop.idle_loops:
            return f"{stop.idle_loops} consecutive loops landed nothing"
        if stop.max_experiments and len(experiments) >= stop.max_experiments:
            return f"the budget of {stop.max_experiments} experiments is spent"
        # the lab's wall time counts from its first start, not from this process's
        started = float(self.state.meta("started_at") or self.started)
        if stop.max_wall_minutes and (time.time() - started) / 60 >= stop.max_wall_minutes:
            return f"the wall-time budget of {stop.max_wall_minutes:g} minutes is spent"
        cost = sum(float(((e.candidate or {}).get("usage") or {}).get("cost_usd") or 0) for e in experiments)
        if stop.max_cost_usd and cost >= stop.max_cost_usd:
            return f"the agent cost budget of ${stop.max_cost_usd:g} is spent (${cost:.2f})"
        recent = [e.judgment.get("verdict") or {} for e in experiments[-self.ws.config.workers.count:] if e.judgment]
        waited_ms = sum(float(verdict.get("lock_wait_ms") or 0.0) for verdict in recent)
        if waited_ms / 60000 >= stop.lock_wait_minutes:
            return "sustained lock contention makes verdicts unreliable"
        if not self.state.experiments(STARTING, RUNNING, COLLECTED, JUDGING, LANDING):
            open_ids = {r.id for r in self.state.hypotheses(backlog.OPEN)}
            if not open_ids:
                return "the backlog is empty"
            if open_ids <= self._blocked():
                return "every open hypothesis needs a launcher that failed in this run; fix it and run again"
        return None

    def final_verdict(self) -> None:
        """Main at the end against main at the start: one paired verdict (same lock, same suite), once per pair.

        The lab's honest total: medians taken in different campaigns, at
        different loads, are never divided by each other.
        """
        starts = self.state.events("lab-start")
        if not starts:
            return
        start, end = starts[0]["data"]["base"], self.ws.target_base()
        done = self.state.events("final-verdict")
        if done and (done[-1]["data"]["start"], done[-1]["data"]["end"]) == (start, end):
            return
        if end == start:
            self.state.log("final-verdict", {"start": start, "end": end, "moved": False})
            return
        self.say(f"final verdict: main {end[:12]} against main at the start {start[:12]}, paired")
        first = judging.baseline_binary(self.ws, self.state, start)
        verdict = judging.measure(self.ws, first, judging.baseline_binary(self.ws, self.state, end),
                                  progress=self.measure_progress)
        self.state.log("final-verdict", {"start": start, "end": end, "moved": True, "verdict": verdict})

    def finish(self, reason: str) -> None:
        self.final_verdict()
        stops = self.state.events("stop")
        since = [e for e in self.state.events() if stops and e["id"] > stops[-1]["id"]]
        # a finished lab run again with nothing new to do does not journal the same stop again
        repeated = bool(stops) and stops[-1]["data"].get("reason") == reason and all(
            e["kind"] == "final-verdict" for e in since)
        if not repeated:
            self.state.log("stop", {"reason": reason})
        records.write_notebook(self.ws.root, self.state, final=True)
        self.say(f"stopped: {reason}; wrote {self.ws.root / 'FINAL_REPORT.md'}")

    # -- the loop ----------------------------------------------------------------------------

    def preflight(self) -> None:
        """Before anything is touched: every launcher runs, and every open hypothesis names one that exists."""
        preflight(self.ws.config)
        for record in self.state.hypotheses(backlog.OPEN):
            launcher_for(self.ws.config, str(record.data.get("launcher") or ""))

    def run(self) -> str:
        """Run until a stop condition holds; returns the reason."""
        self.preflight()
        events = self.state.events()
        if events and events[-1]["kind"] == "stop":
            self.state.set_meta("idle_loops", "0")  # a new session after a clean stop starts fresh
        self.executor = make_executor(self.ws.config.workers.executor, self.ws.tmux_socket, self.ws.executor_dir)
        try:
            with self.executor:
                if self.executor.kind == "subprocess" and self.ws.config.workers.executor == "auto":
                    self.say("tmux is not installed: workers run as plain subprocesses")
                landing.check_publication(self.ws, self.state)
                self.start()
                self.resume_workers()
                reason: str | None = None
                while True:
                    self.collect()
                    if self.judge_next():
                        continue
                    reason = self.stop_reason()
                    active = self.state.experiments(STARTING, RUNNING, COLLECTED, JUDGING, LANDING)
                    if reason is None:
                        self.assign()
                    elif not active:
                        break
                    time.sleep(POLL_S)
        finally:
            self.executor = None
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
