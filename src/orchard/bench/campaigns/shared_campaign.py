"""Judging several candidates against one baseline together: a round runs the baseline once and every undecided
candidate once (K+1 runs for K candidates instead of the 2K of K campaigns), in a seeded random order.

Each candidate gets its own paired verdict: its pairs are (that round's baseline run, its own run), judged at the
looks of the campaign it would have alone (`AdaptivePlan` with the suite's `extra_runs`, at the suite's alpha),
and it stops on that campaign's rule (settled, past `runs` with nothing open, a failed gate, rows that cannot be
compared) while the others go on; the baseline keeps running while any candidate is undecided.

What is controlled is each candidate's false-claim rate, at alpha, which is what K separate verdicts control: a
candidate's verdict reads only its own pairs and stops on its own rule, and the random order makes its pairs'
two runs exchangeable when it equals the baseline, so sharing the baseline run changes nothing of its own
error. Across the K, sharing correlates the candidates positively (one fast baseline run makes every candidate
look slower at once); for two-sided tests that cannot raise the chance of any false claim above that of K
independent verdicts (Sidak's inequality), so a shared campaign is never worse family-wise than separate ones.
No split of alpha across candidates: it would make a candidate's verdict depend on how many others happened to
wait beside it, and cost power near the floor (Bonferroni, Dunnett and Holm's recycling measured in
docs/benchmarks.md, section 2). One candidate is exactly `run_verdict`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from orchard.bench.binary import check_binary
from orchard.bench.campaigns.binary_counts import BinaryCounts
from orchard.bench.campaigns.campaign import (
    adaptive_plan,
    baseline_refusal,
    cached_calibration,
    calibrate_now,
    calibration_note,
    cpu_share,
    decided,
    run_verdict,
    timing_specs,
    verdict_warnings,
)
from orchard.bench.campaigns.pairs import IncomparableRows, PairProgress, Refusal, Samples, judge_look, quiet
from orchard.bench.campaigns.rounds import BASELINE, CandidatePair, RoundRunner, role_of
from orchard.bench.checks import shape_check
from orchard.bench.checks.first_runs import RunSeries
from orchard.bench.checks.gates import run_command_gates
from orchard.bench.deciding.calibration import Calibration
from orchard.bench.deciding.decide import AdaptivePlan, advise, extension_note, open_metrics
from orchard.bench.deciding.verdict import (
    CalibrationNote,
    GateResult,
    MetricResult,
    Unjudged,
    Verdict,
)
from orchard.bench.held_out.holdout import label
from orchard.bench.held_out.variant_watch import watch_variants
from orchard.bench.measuring import instructions
from orchard.bench.measuring.measure import Observation, workbench
from orchard.bench.results.display import rows_summary
from orchard.bench.results.store import RunWriter
from orchard.bench.sandbox.confinement import RunConfinement, for_campaign
from orchard.bench.suites.suite import Suite


@dataclass(frozen=True)
class SharedVerdicts:
    """What a shared-baseline campaign gave: one verdict per candidate (in the order given) and what it cost."""

    verdicts: tuple[Verdict, ...]
    rounds: int  # rounds measured after the warm-up round
    runs: int  # every measured run, the warm-up round's included (K+1 per scenario and round while all are live)
    seed: int


@dataclass
class _Candidate:
    """One candidate's campaign inside the shared one."""

    samples: Samples
    series: RunSeries
    gates: list[GateResult]  # its command gates, run once before the rounds, and the shape check's after them
    metrics: list[MetricResult] = field(default_factory=list)
    pairs: int = 0
    failed_gates: list[GateResult] = field(default_factory=list)
    refusal: Refusal | None = None
    done: bool = False
    went_on: list[str] = field(default_factory=list)  # why it was measured past `runs`: its metrics open there
    counts: BinaryCounts | None = None  # its scenarios counted per binary (set once the calibration is known)

    def take(self, index: int, share: CandidatePair, plan: AdaptivePlan, cal: Calibration) -> None:
        """This round's pairs; judged at a look, where the candidate stops as its own campaign would."""
        if share.incomparable is not None or share.failed_gates:
            self.failed_gates = share.failed_gates
            self.refusal = None if share.incomparable is None else Refusal(Unjudged.INCOMPARABLE_ROWS,
                                                                            share.incomparable)
            self.done = True
            return
        for base, cand in share.pairs:
            self.series.add(base, cand)
        if index == 0:
            return
        self.pairs = index
        for base, cand in share.pairs:
            self.samples.add(base, cand)
        level = plan.alpha_at(index)
        if level is not None and self.counts is not None:
            self.metrics, still = judge_look(self.counts.suite, cal, self.counts, self.samples, (index, level))
            self.done = plan.stops(index, still)
            if index == plan.max_runs and not self.done:
                self.went_on = open_metrics(self.metrics, plan.last)

    def stop(self, refusal: Refusal) -> None:
        self.refusal, self.done = self.refusal or refusal, True


def _baseline_failure(baselines: Sequence[Observation]) -> str | None:
    failed = next((b for b in baselines if not b.ok), None)
    return None if failed is None else (f"baseline failed scenario '{failed.scenario}' ({failed.failure}); "
                                        "nothing can be compared")


def _rounds(runner: RoundRunner, judged: list[_Candidate], cal: Calibration, plan: AdaptivePlan,
            progress: PairProgress, between_rounds: Callable[[], None]) -> tuple[int, int]:
    """The warm-up round, then rounds until every candidate stopped or `plan.last`: (rounds, runs)."""
    rounds = runs = 0
    counts = [BinaryCounts(runner.suite, cal, runner.bench, {"baseline": runner.binaries[BASELINE],
                                                            "candidate": runner.binaries[role_of(k)]},
                           runner.writer, runner.base_meta) for k in range(len(judged))]
    for candidate, its in zip(judged, counts, strict=True):
        candidate.counts = its
    progress(0, plan.max_runs, f"round order seed {runner.seed}; {len(judged)} candidates share each baseline run")
    for index in range(plan.last + 1):
        live = [k for k, candidate in enumerate(judged) if not candidate.done]
        if not live:
            break
        # counted in the rounds unless every live candidate counts the scenario per binary (one whose counts
        # strayed is counted per pair from here, and the others' per-binary decisions stand)
        runner.per_binary = set.intersection(*(counts[k].scenarios for k in live))
        try:
            baselines, shares = runner.run_round(index, index == 0, live)
        except IncomparableRows as changed:  # a binary changed: nothing measured since counts, for anyone
            for k in live:
                judged[k].stop(Refusal(Unjudged.INCOMPARABLE_ROWS, str(changed)))
            break
        runs += len(runner.suite.scenarios) * (len(live) + 1)
        rounds = index
        between_rounds()
        if (error := _baseline_failure(baselines)) is not None:
            for k in live:
                judged[k].stop(Refusal(Unjudged.BASELINE_FAILED, error))
            break
        for k in live:
            judged[k].take(index, shares[k], plan, cal)
        progress(index, plan.max_runs, "" if index else "warm-up round")
    return rounds, runs


def run_shared_verdicts(suite: Suite, baseline: Path, candidates: Sequence[Path], *, runs: int | None = None,
                        seed: int | None = None, results: Path = Path("results"), progress: PairProgress = quiet,
                        calibration_file: Path | None = None, confinement: RunConfinement | None = None,
                        between_rounds: Callable[[], None] = lambda: None) -> SharedVerdicts:
    """Judge every candidate against `baseline` on `suite` in one campaign; one verdict per candidate."""
    if len(candidates) == 1:  # exactly today's campaign
        only = run_verdict(suite, baseline, candidates[0], runs=runs, seed=seed, results=results, progress=progress,
                           calibration_file=calibration_file, confinement=confinement, between_pairs=between_rounds)
        pairs = only.pairs or 0
        scenarios = len(suite.scenarios) + (len(only.variants.checks) if only.variants else 0)
        return SharedVerdicts((only,), pairs, 2 * scenarios * (pairs + 1), only.seed or 0)
    baseline = check_binary(baseline, "baseline")
    paths = [check_binary(path, "candidate") for path in candidates]
    confinement = confinement or for_campaign(suite.confine, suite.directory, baseline, *paths)
    plan = adaptive_plan(runs, suite)  # each candidate's, as alone
    calibration_file = calibration_file or suite.calibration
    cal = cached_calibration(suite, calibration_file, confinement.isolation)
    cached = cal is not None
    seed = random.SystemRandom().randrange(1, 2**31) if seed is None else seed
    with workbench(suite, confinement=confinement) as bench, RunWriter(results, "verdict", rows_summary) as writer:
        watch = watch_variants(suite, bench, baseline)
        runner = RoundRunner(watch.suite, bench, baseline, paths, writer, seed, "verdict",
                             [watch, *(watch.again() for _ in paths[1:])])
        cal, refusal = calibrate_now(cal, suite, baseline, results, progress, calibration_file, confinement)
        command_gates = run_command_gates(suite.gates, bench, runner.binaries)
        judged = _candidates(suite, runner, refusal or baseline_refusal(command_gates), command_gates)
        rounds, measured = (0, 0) if cal is None else _rounds(runner, judged, cal, plan, progress,
                                                                         between_rounds)
        with runner.lock:
            for k, candidate in enumerate(judged):
                if candidate.refusal is None and cal is not None and all(g.passed for g in candidate.gates):
                    candidate.gates += shape_check.check(suite, bench, baseline, paths[k],
                                                         runner.trackers[k].determinism_fields, runner.metric_names)
        runner.lock.print_total()
        note = calibration_note(cal, cached)
        verdicts = tuple(_verdict(suite, runner, writer, (cal, note, plan), k, candidate)
                         for k, candidate in enumerate(judged))
    return SharedVerdicts(verdicts, rounds, measured, seed)


def _candidates(suite: Suite, runner: RoundRunner, refusal: Refusal | None,
                command_gates: Mapping[str, list[GateResult]]) -> list[_Candidate]:
    """Each candidate's campaign, with its command gates; stopped before the rounds when the baseline cannot be
    judged or a gate of its own failed."""
    specs = [*suite.metrics, *timing_specs(suite)]
    judged = [_Candidate(Samples(suite.metrics), RunSeries(specs), list(command_gates.get(role_of(k), [])))
              for k in range(len(runner.trackers))]
    for candidate in judged:
        if refusal is not None:
            candidate.stop(refusal)
        candidate.done = candidate.done or not all(g.passed for g in candidate.gates)
    return judged


def _verdict(suite: Suite, runner: RoundRunner, writer: RunWriter,
             calibrated: tuple[Calibration | None, CalibrationNote | None, AdaptivePlan], k: int,
             judged: _Candidate) -> Verdict:
    """Candidate `k`'s verdict, as `run_verdict` would give it, saying it shared its baseline runs."""
    cal, note, plan = calibrated
    others = len(runner.trackers) - 1
    decision, variants = decided(suite, runner.watches[k], cal, judged.refusal, judged.series.flag(judged.metrics),
                                 judged.gates + judged.failed_gates)
    decision.reasons.extend(extension_note(judged.pairs, plan.max_runs, judged.went_on))
    decision.reasons.append(f"judged beside {others} other candidate{'s' if others > 1 else ''} on shared baseline "
                            "runs, at its own alpha as alone")
    warnings = runner.trackers[k].warnings + verdict_warnings(runner.lock, judged.samples, cal, decision)
    candidate = runner.binaries[role_of(k)]
    writer.write({"lane": "verdict", "step_kind": "verdict", "verdict": decision.verdict, "reasons": decision.reasons,
                  "pairs": judged.pairs, "candidate": str(candidate), "subject": role_of(k), **runner.base_meta})
    return Verdict(
        verdict=decision.verdict, reasons=decision.reasons, baseline=runner.binaries["baseline"], candidate=candidate,
        metrics=label(suite, decision.metrics), gates=decision.gates, suite=str(suite.path), seed=runner.seed,
        pairs=judged.pairs, planned_pairs=plan.last,
        calibration=note, warnings=warnings, lock_wait_ms=runner.lock.total_wait_ms, rows=writer.path,
        summary=writer.summary_path, unjudged=decision.unjudged, confinement=runner.bench.confinement.note,
        advice=advise(suite.metrics, decision.metrics, cpu_share(suite, judged.series),
                      lambda: instructions.available() is not None), variants=variants,
    )
