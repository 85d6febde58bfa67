"""Running a verdict or a calibration: pairs, order, warm-up, adaptive n.

A campaign measures pairs: one baseline run and one candidate run of every
scenario, back to back in an order drawn from a seeded generator (the seed is
printed, so a campaign can be replayed), all under the machine-wide lock.
A warm-up pair is run and recorded but not judged. Gates are checked after
every pair; statistics only at the planned looks, where the campaign stops
as soon as every metric is settled.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from orchard.bench.binary import binary_sha256, check_binary
from orchard.bench.campaigns.pairs import (
    BaselineFailed,
    Measured,
    PairProgress,
    PairRunner,
    Refusal,
    Samples,
    baseline_error,
    check_runs,
    measure_pairs,
    quiet,
)
from orchard.bench.checks import shape_check
from orchard.bench.checks.first_runs import RunSeries
from orchard.bench.checks.gates import run_command_gates
from orchard.bench.checks.identical import same_program
from orchard.bench.deciding import calibration as calibration_cache
from orchard.bench.deciding.decide import AdaptivePlan, advise, extension_note, overall
from orchard.bench.deciding.noise_advice import CPU, WALL
from orchard.bench.deciding.variant_report import VariantReport
from orchard.bench.deciding.verdict import (
    CalibrationNote,
    Direction,
    GateResult,
    MetricResult,
    MetricSpec,
    Unjudged,
    Verdict,
    VerdictDecision,
    VerdictWord,
)
from orchard.bench.held_out.holdout import label
from orchard.bench.held_out.variant_watch import VariantWatch, watch_variants
from orchard.bench.lock import MeasurementLock
from orchard.bench.machine import machine_facts, machine_fingerprint
from orchard.bench.measuring import instructions
from orchard.bench.measuring.measure import workbench
from orchard.bench.results.display import rows_summary
from orchard.bench.results.store import RunWriter
from orchard.bench.sandbox.confinement import RunConfinement, for_campaign
from orchard.bench.suites.suite import MAX_RUNS, MIN_RUNS_FLOOR, Suite
from orchard.errors import UsageError

CALIBRATION_ATTEMPTS = 2


def _aa_campaign(
    suite: Suite,
    baseline: Path,
    count: int,
    seed: int,
    results: Path,
    progress: PairProgress,
    confinement: RunConfinement,
) -> tuple[dict[str, calibration_cache.MetricCalibration], list[str], Path]:
    """One A/A campaign: (noise per metric, metrics whose interval excludes zero, rows file)."""
    with workbench(suite, confinement=confinement) as bench, \
            RunWriter(results, "calibrate", rows_summary) as writer:
        runner = PairRunner(suite, bench, baseline, baseline, writer, seed, "calibrate")
        samples = Samples(suite.metrics)
        progress(0, count, f"A/A calibration, seed {seed}")
        for index in range(count + 1):
            outcome = runner.run_pair(index, warmup=index == 0)
            error = baseline_error(outcome) or next(
                (f"baseline failed gate {g.name}: {g.detail}" for _, _, gs in outcome for g in gs), None
            )
            if error:
                raise BaselineFailed(error)
            if index > 0:
                for base, cand, _ in outcome:
                    samples.add(base, cand)
                progress(index, count, "")
        runner.lock.print_total()
    metrics, failed = calibration_cache.compute(suite.metrics, samples.values, suite.alpha)
    return metrics, failed, writer.path


def calibrate(
    suite: Suite,
    baseline: Path,
    *,
    runs: int | None = None,
    seed: int | None = None,
    results: Path = Path("results"),
    progress: PairProgress = quiet,
    file: Path | None = None,
    confinement: RunConfinement | None = None,
) -> calibration_cache.Calibration:
    """A/A: the baseline against itself; saves (in the cache, and in `file` if given) and returns it."""
    baseline = check_binary(baseline, "baseline")
    confinement = confinement or for_campaign(suite.confine, suite.directory, baseline)
    count = suite.calibration_runs if runs is None else runs
    if count < MIN_RUNS_FLOOR:
        raise UsageError(f"--runs must be at least {MIN_RUNS_FLOOR} for a calibration (got {count})")
    if count > MAX_RUNS:
        raise UsageError(f"--runs must be at most {MAX_RUNS:,} for a calibration (got {count})")
    metrics, seed = _aa_until_settled(suite, baseline, count, seed, results, progress, confinement)
    result = calibration_cache.Calibration(
        suite=suite.name,
        suite_digest=suite.digest,
        machine_fingerprint=machine_fingerprint(),
        created_at=time.time(),
        runs=count,
        seed=seed,
        baseline=str(baseline),
        metrics=metrics,
        machine=machine_facts(),
        file=file,
        env_isolation=confinement.isolation,
        baseline_sha256=binary_sha256(baseline),
    )
    calibration_cache.save(result)
    return result


def _aa_until_settled(suite: Suite, baseline: Path, count: int, seed: int | None, results: Path,
                      progress: PairProgress,
                      confinement: RunConfinement) -> tuple[dict[str, calibration_cache.MetricCalibration], int]:
    """A/A campaigns until every interval includes zero: (noise per metric, the seed of the one that did).

    An interval that excludes zero is measured once more on fresh samples
    before the calibration is refused: a real order effect or a drifting
    machine shows again, while a 1-in-100 accident does not (and the first
    attempt's rows stay on record).
    """
    rng = random.SystemRandom()
    seed = rng.randrange(1, 2**31) if seed is None else seed
    for attempt in range(1, CALIBRATION_ATTEMPTS + 1):
        metrics, failed, rows = _aa_campaign(suite, baseline, count, seed, results, progress, confinement)
        if not failed:
            break
        details = ", ".join(
            f"{key} [{metrics[key].interval[0]:+.2%}, {metrics[key].interval[1]:+.2%}]" for key in failed
        )
        if attempt == CALIBRATION_ATTEMPTS:
            raise calibration_cache.CalibrationFailed(
                f"A/A calibration failed {attempt} times: the same binary measured against itself moved "
                f"{details} (interval excludes zero; last seed {seed}). The machine is not quiet enough or "
                f"the scenario has order effects; nothing was cached. Rows: {rows}"
            )
        progress(0, count, f"A/A interval excludes zero for {details}: measuring again on fresh samples")
        seed = rng.randrange(1, 2**31)
    return metrics, seed


def run_verdict(suite: Suite, baseline: Path, candidate: Path, *, runs: int | None = None, seed: int | None = None,
                results: Path = Path("results"), recalibrate: bool = False, progress: PairProgress = quiet,
                calibration_file: Path | None = None, confinement: RunConfinement | None = None,
                between_pairs: Callable[[], None] = lambda: None, skip_identical: bool = False) -> Verdict:
    """Judge `candidate` against `baseline` on `suite`.

    The calibration comes from `calibration_file` (or the suite's), else the
    cache; a missing one is made now (and written to that file). With
    `skip_identical`, two sides that are one program (`identical.py`) are
    NO-CHANGE without measuring.
    """
    baseline = check_binary(baseline, "baseline")
    candidate = check_binary(candidate, "candidate")
    confinement = confinement or for_campaign(suite.confine, suite.directory, baseline, candidate)
    plan = adaptive_plan(runs, suite)
    calibration_file = calibration_file or suite.calibration
    cal = None if recalibrate else cached_calibration(suite, calibration_file, confinement.isolation)
    cached = cal is not None
    if skip_identical and (same := same_program(suite.directory, baseline, candidate)):  # after the usage checks
        return _unmeasured(suite, baseline, candidate, same, results)
    seed = random.SystemRandom().randrange(1, 2**31) if seed is None else seed
    with workbench(suite, confinement=confinement) as bench, RunWriter(results, "verdict", rows_summary) as writer:
        watch = watch_variants(suite, bench, baseline)
        runner = PairRunner(watch.suite, bench, baseline, candidate, writer, seed, "verdict", watch)
        samples, series = Samples(suite.metrics), RunSeries([*suite.metrics, *timing_specs(suite)])
        cal, refusal = calibrate_now(cal, suite, baseline, results, progress, calibration_file, confinement)
        command_gates = run_command_gates(suite.gates, bench, runner.binaries)
        gates = list(command_gates.get("candidate", []))
        refusal = refusal or baseline_refusal(command_gates)
        measured, gates = _pairs(suite, runner, (samples, series), cal, refusal, gates, plan, progress,
                                 between_pairs)
        refusal = refusal or measured.refusal
        runner.lock.print_total()
        decision, variants = decided(suite, watch, cal, refusal, series.flag(measured.metrics),
                                     gates + measured.failed_gates)
        decision.reasons.extend(extension_note(measured.pairs, plan.max_runs, measured.went_on))
        warnings = runner.tracker.warnings + verdict_warnings(runner.lock, samples, cal, decision)
        writer.write({"lane": "verdict", "step_kind": "verdict", "verdict": decision.verdict,
                      "reasons": decision.reasons, "pairs": measured.pairs, "scenario_pairs": _scenario_pairs(samples),
                      "seed": seed, **runner.base_meta})
    return Verdict(
        verdict=decision.verdict, reasons=decision.reasons, baseline=baseline, candidate=candidate,
        metrics=label(suite, decision.metrics), gates=decision.gates, suite=str(suite.path), seed=seed,
        pairs=measured.pairs, planned_pairs=plan.last, calibration=calibration_note(cal, cached), warnings=warnings,
        lock_wait_ms=runner.lock.total_wait_ms, rows=writer.path, summary=writer.summary_path,
        unjudged=decision.unjudged, confinement=confinement.note,
        advice=advise(suite.metrics, decision.metrics, cpu_share(suite, series),
                      lambda: instructions.available() is not None), variants=variants,
    )


def _pairs(suite: Suite, runner: PairRunner, kept: tuple[Samples, RunSeries], cal: calibration_cache.Calibration | None,
           refusal: Refusal | None, gates: list[GateResult], plan: AdaptivePlan, progress: PairProgress,
           between_pairs: Callable[[], None]) -> tuple[Measured, list[GateResult]]:
    """The pairs, measured unless the candidate is refused or fails a command gate, and the shape check once
    they all were (under the lock, as they were): what they gave, and the gates with the shape check's."""
    if refusal is not None or not all(g.passed for g in gates):
        return Measured(), gates
    assert cal is not None  # a failed calibration is a refusal
    measured = measure_pairs(runner, kept, cal, plan, progress, between_pairs)
    if measured.refusal is not None:
        return measured, gates
    with runner.lock:
        return measured, gates + shape_check.check(suite, runner.bench, runner.binaries["baseline"],
                                                   runner.binaries["candidate"], runner.tracker.determinism_fields,
                                                   runner.metric_names)


def adaptive_plan(runs: int | None, suite: Suite) -> AdaptivePlan:
    """The looks of one candidate's campaign: `runs` checked against the suite, its alpha and extra runs."""
    min_runs, max_runs = check_runs(runs, suite)
    return AdaptivePlan(min_runs, max_runs, suite.alpha, suite.extra_runs)


def baseline_refusal(command_gates: Mapping[str, list[GateResult]]) -> Refusal | None:
    """The baseline failing a command gate: nothing can be judged against it."""
    return next((Refusal(Unjudged.BASELINE_FAILED, f"baseline fails gate {g.name}: {g.detail}")
                 for g in command_gates.get("baseline", []) if not g.passed), None)


def decided(suite: Suite, watch: VariantWatch, cal: calibration_cache.Calibration | None, refusal: Refusal | None,
            flagged: tuple[list[MetricResult], list[str]],
            gates: list[GateResult]) -> tuple[VerdictDecision, VariantReport]:
    """A candidate's decision: ERROR on a refusal, else its metrics (first runs flagged) and gates, a win that does
    not hold on a variant REGRESSED."""
    metrics, flags = flagged
    decision = (VerdictDecision(VerdictWord.ERROR, reasons=[refusal.reason], unjudged=refusal.cause) if refusal
                else overall(metrics, gates))
    decision, variants = watch.judge(decision, {} if cal is None else cal.noise(), suite.alpha)
    decision.reasons.extend(flags if refusal is None else [])
    return decision, variants


def calibration_note(cal: calibration_cache.Calibration | None, cached: bool) -> CalibrationNote | None:
    """What a verdict says of its calibration: cached or made now, its age, runs, seed, machine and file."""
    return None if cal is None else CalibrationNote(cached, round(cal.age_s(), 1), cal.runs, cal.seed,
                                                      cal.machine_fingerprint,
                                                      None if cal.file is None else str(cal.file))


def _unmeasured(suite: Suite, baseline: Path, candidate: Path, reason: str, results: Path) -> Verdict:
    """The verdict of two identical programs: NO-CHANGE, nothing measured, its one row on record."""
    with RunWriter(results, "verdict", rows_summary) as writer:
        writer.write({"lane": "verdict", "step_kind": "verdict", "suite": suite.name, "verdict": VerdictWord.NO_CHANGE,
                      "reasons": [reason], "pairs": 0, "baseline": str(baseline), "candidate": str(candidate)})
    return Verdict(verdict=VerdictWord.NO_CHANGE, reasons=[reason], baseline=baseline, candidate=candidate,
                   suite=str(suite.path), pairs=0, rows=writer.path, summary=writer.summary_path)


def _scenario_pairs(samples: Samples) -> dict[str, int]:
    """Judged pairs per scenario: fewer than the campaign's for one decided exactly and not run after."""
    return {spec.scenario: len(samples.values[spec.key][0]) for spec in samples.specs}


def timing_specs(suite: Suite) -> list[MetricSpec]:
    """wall_ms and cpu_ms of every scenario the suite does not judge them for: recorded in the run series so that
    the advice can tell a CPU-bound scenario (never judged)."""
    judged = {spec.key for spec in suite.metrics}
    return [MetricSpec(s.name, metric, Direction.LOWER) for s in suite.scenarios for metric in (CPU, WALL)
            if f"{s.name}/{metric}" not in judged]


def cpu_share(suite: Suite, series: RunSeries) -> dict[str, float]:
    """The baseline's cpu_ms over its wall_ms per scenario, in its least contended run: a loaded machine stretches
    a CPU-bound program's wall time in most runs (a 0.4 to 0.65 share at load 5.5 on 2 cores)."""
    shares = {}
    for scenario in suite.scenarios:
        cpu, wall = (series.values.get(("baseline", f"{scenario.name}/{metric}"), []) for metric in (CPU, WALL))
        ratios = [c / w for c, w in zip(cpu, wall, strict=True) if w > 0] if len(cpu) == len(wall) else []
        if ratios:
            shares[scenario.name] = max(ratios)
    return shares


def calibrate_now(cal: calibration_cache.Calibration | None, suite: Suite, baseline: Path, results: Path,
                  progress: PairProgress, calibration_file: Path | None,
                  confinement: RunConfinement) -> tuple[calibration_cache.Calibration | None, Refusal | None]:
    """The verdict's calibration: `cal` when it found one, else an A/A calibration made now: (it, None), or (None,
    why the baseline cannot be judged)."""
    if cal is not None:
        return cal, None
    progress(0, suite.calibration_runs, "no A/A calibration cached for this machine and suite: calibrating")
    try:
        return calibrate(suite, baseline, results=results, progress=progress, file=calibration_file,
                         confinement=confinement), None
    except BaselineFailed as failure:
        return None, Refusal(Unjudged.BASELINE_FAILED, str(failure))


def cached_calibration(suite: Suite, calibration_file: Path | None,
                        isolation: str) -> calibration_cache.Calibration | None:
    """The named calibration file's, else the cache's for this machine, suite and confinement (None: calibrate
    now)."""
    if calibration_file is not None:
        return calibration_cache.load_file(calibration_file, suite.digest, suite.name, isolation)
    return calibration_cache.load(machine_fingerprint(), suite.digest, isolation)


def verdict_warnings(
    lock: MeasurementLock, samples: Samples, cal: calibration_cache.Calibration | None, decision: VerdictDecision
) -> list[str]:
    """hyperfine-style notes on when these numbers should not be trusted (none without a calibration: nothing was
    measured)."""
    if cal is None:
        return []
    notes = []
    if lock.disabled:
        notes.append("the measurement lock was disabled: other measurements may have overlapped these")
    if lock.total_wait_ms > 1000:
        notes.append(f"waited {lock.total_wait_ms / 1000:.1f}s for the measurement lock: the machine is shared")
    if cal.age_s() > 7 * 86400:
        notes.append(f"the calibration is {cal.age_text()} old: consider `orchard calibrate` again")
    measured, _ = samples.measured()
    unmeasured = sorted({spec.key for spec in samples.specs} - {spec.key for spec in measured}
                        - {metric.key for metric in decision.metrics})  # counted per binary: judged, not paired
    if unmeasured and decision.metrics:
        notes.append(f"unmeasured here (null in rows), not judged: {', '.join(unmeasured)}")
    for metric in decision.metrics:
        if metric.floor > 0.10:
            notes.append(f"{metric.key}: noise floor {metric.floor:.1%} is high; only large effects can be claimed")
    return notes
