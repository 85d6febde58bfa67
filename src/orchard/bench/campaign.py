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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchard.bench import calibration as calibration_cache
from orchard.bench import rows as rowlib
from orchard.bench.binary import binary_sha256, check_binary
from orchard.bench.confinement import RunConfinement, for_campaign
from orchard.bench.decide import AdaptivePlan, decide_metrics, overall, settled
from orchard.bench.display import rows_summary
from orchard.bench.first_runs import RunSeries
from orchard.bench.gates import GateTracker, run_command_gates
from orchard.bench.holdout import label
from orchard.bench.lock import MeasurementLock
from orchard.bench.machine import machine_facts, machine_fingerprint
from orchard.bench.measure import Observation, RunSpec, Workbench, count_instructions, observe, workbench
from orchard.bench.store import RunWriter
from orchard.bench.suite import MIN_RUNS_FLOOR, Scenario, Suite
from orchard.bench.verdict import (
    CalibrationNote,
    GateResult,
    MetricResult,
    MetricSpec,
    Unjudged,
    Verdict,
    VerdictDecision,
    VerdictWord,
)
from orchard.errors import OrchardError, UsageError

PairProgress = Callable[[int, int, str], None]  # (pairs done, pairs planned, note)


class BaselineFailed(OrchardError):
    """The baseline itself failed a scenario or gate: there is nothing to compare against."""


class IncomparableRows(OrchardError):
    """Baseline and candidate rows differ in a comparability key (transport, level, ...)."""


def _quiet(done: int, total: int, note: str) -> None:
    pass


def check_runs(runs: int | None, suite: Suite) -> tuple[int, int]:
    """(min_runs, max_runs) for a campaign, refusing counts too small to judge."""
    max_runs = suite.runs if runs is None else runs
    if max_runs < MIN_RUNS_FLOOR:
        raise UsageError(
            f"--runs must be at least {MIN_RUNS_FLOOR} (got {max_runs}): fewer pairs cannot give an exact interval"
        )
    return min(suite.min_runs, max_runs), max_runs


@dataclass
class Samples:
    """Paired metric values per metric key, filled pair by pair."""

    specs: Sequence[MetricSpec]
    values: dict[str, tuple[list[float | None], list[float | None]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.values = {spec.key: ([], []) for spec in self.specs}

    def add(self, baseline: Observation, candidate: Observation) -> None:
        for spec in self.specs:
            if spec.scenario == baseline.scenario:
                self.values[spec.key][0].append(baseline.values.get(spec.metric))
                self.values[spec.key][1].append(candidate.values.get(spec.metric))

    def measured(self) -> tuple[list[MetricSpec], dict[str, tuple[list[float], list[float]]]]:
        """Metrics with a value in every pair (others are reported unmeasured)."""
        specs, out = [], {}
        for spec in self.specs:
            a, b = self.values[spec.key]
            if a and all(v is not None for v in a + b):
                specs.append(spec)
                out[spec.key] = ([float(v) for v in a], [float(v) for v in b])  # type: ignore[arg-type]
        return specs, out


class PairRunner:
    """Measures pairs of one campaign and records every run as a row."""

    def __init__(
        self,
        suite: Suite,
        bench: Workbench,
        baseline: Path,
        candidate: Path,
        writer: RunWriter,
        seed: int,
        lane: str,
    ) -> None:
        self.suite = suite
        self.bench = bench
        self.binaries = {"baseline": baseline, "candidate": candidate}
        self.writer = writer
        self.rng = random.Random(seed)
        self.seed = seed
        self.lock = MeasurementLock(f"orchard {lane} {suite.name}")
        self.tracker = GateTracker(suite.gates, suite.scenarios)
        self.metric_names = {spec.metric for spec in suite.metrics} | set(suite.recorded_only)
        self.subjects = {
            role: {
                "name": role,
                "kind": "binary",
                "label": str(path),
                "binary": str(path),
                "binary_sha256": binary_sha256(path),
            }
            for role, path in self.binaries.items()
        }
        self.base_meta = {
            "lane": lane,
            "suite": suite.name,
            "suite_digest": suite.digest,
            "seed": seed,
            **rowlib.comparability(fixture_id=suite.digest, env_isolation=bench.confinement.isolation),
        }

    def run_pair(self, index: int, warmup: bool) -> list[tuple[Observation, Observation, list[GateResult]]]:
        """One pair over every scenario; returns (baseline, candidate, failed gates) per scenario."""
        measured: list[tuple[Scenario, dict[str, Observation]]] = []
        with self.lock:
            for scenario in self.suite.scenarios:
                order = ("baseline", "candidate") if self.rng.random() < 0.5 else ("candidate", "baseline")
                seen: dict[str, Observation] = {}
                for role in order:
                    meta = {
                        **self.base_meta,
                        **self.lock.metadata(),
                        "pair": index,
                        "warmup": warmup,
                        "order": "-".join(order),
                        "binary": str(self.binaries[role]),
                        "binary_sha256": self.subjects[role]["binary_sha256"],
                    }
                    spec = RunSpec(role, self.subjects[role], index, meta, self.metric_names,
                                   self.tracker.determinism_fields(scenario.name))
                    seen[role] = observe(self.bench, scenario, self.binaries[role], spec, count=False)
                measured.append((scenario, seen))
        results = []
        for scenario, seen in measured:
            for role, observation in seen.items():
                # untimed instruction counts after the lock is released: they do not move with load
                count_instructions(self.bench, scenario, self.binaries[role], observation)
                self.writer.write(observation.row)
            base, cand = seen["baseline"], seen["candidate"]
            _check_comparable(base, cand)
            results.append((base, cand, self.tracker.check_pair(base, cand)))
        self._check_binaries()
        return results

    def _check_binaries(self) -> None:
        """Each binary hashed again after every pair: one swapped and restored mid-campaign is caught."""
        for role, path in self.binaries.items():
            try:
                now = binary_sha256(path)
            except OSError:
                now = "unreadable"
            if now != self.subjects[role]["binary_sha256"]:
                raise IncomparableRows(f"the {role} binary {path} changed during the campaign: nothing measured "
                                       "since it was hashed counts")


def _check_comparable(baseline: Observation, candidate: Observation) -> None:
    """Rows a harness produced with unlike comparability keys are never compared."""
    harness_rows = zip(baseline.row.get("harness_rows", []), candidate.row.get("harness_rows", []), strict=False)
    for base_row, cand_row in harness_rows:
        present = [k for k in rowlib.COMPARABILITY_KEYS if k in base_row or k in cand_row]
        differing = [k for k in present if base_row.get(k) != cand_row.get(k)]
        if differing:
            key = differing[0]
            raise IncomparableRows(
                f"scenario '{baseline.scenario}': rows are not comparable: {key} is "
                f"{base_row.get(key)!r} for the baseline and {cand_row.get(key)!r} for the candidate"
            )


def _baseline_error(results: list[tuple[Observation, Observation, list[GateResult]]]) -> str | None:
    for base, _, _ in results:
        if not base.ok:
            return f"baseline failed scenario '{base.scenario}' ({base.failure}); nothing can be compared"
    return None


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
            error = _baseline_error(outcome) or next(
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
    progress: PairProgress = _quiet,
    file: Path | None = None,
    confinement: RunConfinement | None = None,
) -> calibration_cache.Calibration:
    """A/A: the baseline against itself; saves (in the cache, and in `file` if given) and returns it.

    An interval that excludes zero is measured once more on fresh samples
    before the calibration is refused: a real order effect or a drifting
    machine shows again, while a 1-in-100 accident does not (and the first
    attempt's rows stay on record).
    """
    baseline = check_binary(baseline, "baseline")
    confinement = confinement or for_campaign(suite.confine, suite.directory, baseline)
    count = suite.calibration_runs if runs is None else runs
    if count < MIN_RUNS_FLOOR:
        raise UsageError(f"--runs must be at least {MIN_RUNS_FLOOR} for a calibration (got {count})")
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
    )
    calibration_cache.save(result)
    return result


def run_verdict(
    suite: Suite,
    baseline: Path,
    candidate: Path,
    *,
    runs: int | None = None,
    seed: int | None = None,
    results: Path = Path("results"),
    recalibrate: bool = False,
    progress: PairProgress = _quiet,
    calibration_file: Path | None = None,
    confinement: RunConfinement | None = None,
    between_pairs: Callable[[], None] = lambda: None,
) -> Verdict:
    """Judge `candidate` against `baseline` on `suite`.

    The calibration comes from `calibration_file` (or the suite's), else the
    cache; a missing one is made now (and written to that file).
    """
    baseline = check_binary(baseline, "baseline")
    candidate = check_binary(candidate, "candidate")
    confinement = confinement or for_campaign(suite.confine, suite.directory, baseline, candidate)
    min_runs, max_runs = check_runs(runs, suite)
    calibration_file = calibration_file or suite.calibration
    cal = None if recalibrate else _cached_calibration(suite, calibration_file, confinement.isolation)
    cached = cal is not None
    seed = random.SystemRandom().randrange(1, 2**31) if seed is None else seed
    with workbench(suite, confinement=confinement) as bench, RunWriter(results, "verdict", rows_summary) as writer:
        runner = PairRunner(suite, bench, baseline, candidate, writer, seed, "verdict")
        samples, series = Samples(suite.metrics), RunSeries(suite.metrics)
        refusal: _Refusal | None = None
        if cal is None:
            cal, refusal = _calibrate_now(suite, baseline, results, progress, calibration_file, confinement)
        command_gates = run_command_gates(suite.gates, bench, runner.binaries)
        gates = list(command_gates.get("candidate", []))
        refusal = refusal or next((_Refusal(Unjudged.BASELINE_FAILED, f"baseline fails gate {g.name}: {g.detail}")
                                   for g in command_gates.get("baseline", []) if not g.passed), None)
        measured = _Measured()
        if refusal is None and all(g.passed for g in gates):
            assert cal is not None  # a failed calibration is a refusal
            measured = _measure_pairs(runner, (samples, series), cal, AdaptivePlan(min_runs, max_runs, suite.alpha),
                                      progress, between_pairs)
        refusal = refusal or measured.refusal
        runner.lock.print_total()
        metrics, flagged = series.flag(measured.metrics)
        decision = (VerdictDecision(VerdictWord.ERROR, reasons=[refusal.reason], unjudged=refusal.cause) if refusal
                    else overall(metrics, gates + measured.failed_gates))
        decision.reasons.extend(flagged if refusal is None else [])
        warnings = runner.tracker.warnings + ([] if cal is None else _warnings(runner, samples, cal, decision))
        writer.write({"lane": "verdict", "step_kind": "verdict", "verdict": decision.verdict,
                      "reasons": decision.reasons, "pairs": measured.pairs, "seed": seed, **runner.base_meta})
    note = None if cal is None else CalibrationNote(cached, round(cal.age_s(), 1), cal.runs, cal.seed,
                                                      cal.machine_fingerprint,
                                                      None if cal.file is None else str(cal.file))
    return Verdict(
        verdict=decision.verdict, reasons=decision.reasons, baseline=baseline, candidate=candidate,
        metrics=label(suite, decision.metrics), gates=decision.gates, suite=str(suite.path), seed=seed,
        pairs=measured.pairs, planned_pairs=max_runs, calibration=note, warnings=warnings,
        lock_wait_ms=runner.lock.total_wait_ms, rows=writer.path, summary=writer.summary_path,
        unjudged=decision.unjudged, confinement=confinement.note,
    )


def _calibrate_now(suite: Suite, baseline: Path, results: Path, progress: PairProgress, calibration_file: Path | None,
                   confinement: RunConfinement) -> tuple[calibration_cache.Calibration | None, _Refusal | None]:
    """A/A calibration for a verdict that found none: (it, None), or (None, why the baseline cannot be judged)."""
    progress(0, suite.calibration_runs, "no A/A calibration cached for this machine and suite: calibrating")
    try:
        return calibrate(suite, baseline, results=results, progress=progress, file=calibration_file,
                         confinement=confinement), None
    except BaselineFailed as failure:
        return None, _Refusal(Unjudged.BASELINE_FAILED, str(failure))


def _cached_calibration(suite: Suite, calibration_file: Path | None,
                        isolation: str) -> calibration_cache.Calibration | None:
    """The named calibration file's, else the cache's for this machine, suite and confinement (None: calibrate
    now)."""
    if calibration_file is not None:
        return calibration_cache.load_file(calibration_file, suite.digest, suite.name, isolation)
    return calibration_cache.load(machine_fingerprint(), suite.digest, isolation)


@dataclass(frozen=True)
class _Refusal:
    """Why a verdict campaign compared nothing: its ERROR."""

    cause: Unjudged
    reason: str


@dataclass(frozen=True)
class _Measured:
    """What a campaign's pairs gave: the metrics of its last look, or why it stopped before one."""

    metrics: list[MetricResult] = field(default_factory=list)
    pairs: int = 0  # judged pairs, the warm-up not counted
    failed_gates: list[GateResult] = field(default_factory=list)
    refusal: _Refusal | None = None


def _measure_pairs(runner: PairRunner, kept: tuple[Samples, RunSeries], cal: calibration_cache.Calibration,
                   plan: AdaptivePlan, progress: PairProgress, between_pairs: Callable[[], None]) -> _Measured:
    """The warm-up pair, then pairs up to `plan.max_runs`, judged at each look until every metric is settled.

    A gate failed, a failed baseline run or rows not comparable end the campaign at that pair. Every run, the
    warm-up's too, goes into the run series (a first run unlike the later ones is state between runs);
    `between_pairs` re-checks the binaries after each pair.
    """
    samples, series = kept
    metrics: list[MetricResult] = []
    pairs = 0
    progress(0, plan.max_runs, f"pair order seed {runner.seed}; warm-up pair")
    for index in range(plan.max_runs + 1):
        try:
            outcome = runner.run_pair(index, warmup=index == 0)
        except IncomparableRows as refusal:
            return _Measured(metrics, pairs, refusal=_Refusal(Unjudged.INCOMPARABLE_ROWS, str(refusal)))
        between_pairs()
        error = _baseline_error(outcome)
        failed = [g for _, _, gs in outcome for g in gs]
        if error or failed:
            return _Measured(metrics, pairs, failed, None if error is None else _Refusal(Unjudged.BASELINE_FAILED,
                                                                                          error))
        for base, cand, _ in outcome:
            series.add(base, cand)
        if index == 0:
            continue
        pairs = index
        for base, cand, _ in outcome:
            samples.add(base, cand)
        progress(index, plan.max_runs, "")
        level = plan.alpha_at(index)
        if level is not None:
            specs, values = samples.measured()
            metrics = decide_metrics(specs, values, _noise_for(cal, specs), level)
            if settled(metrics):
                break
    return _Measured(metrics, pairs)


def _noise_for(cal: calibration_cache.Calibration, specs: Sequence[MetricSpec]) -> dict[str, Any]:
    missing = [spec.key for spec in specs if spec.key not in cal.metrics]
    if missing:
        raise OrchardError(
            f"the cached calibration has no noise figure for {', '.join(missing)}: run `orchard calibrate` again"
        )
    return {spec.key: cal.metrics[spec.key].noise() for spec in specs}


def _warnings(
    runner: PairRunner, samples: Samples, cal: calibration_cache.Calibration, decision: VerdictDecision
) -> list[str]:
    """hyperfine-style notes on when these numbers should not be trusted."""
    notes = []
    if runner.lock.disabled:
        notes.append("the measurement lock was disabled: other measurements may have overlapped these")
    if runner.lock.total_wait_ms > 1000:
        notes.append(f"waited {runner.lock.total_wait_ms / 1000:.1f}s for the measurement lock: the machine is shared")
    if cal.age_s() > 7 * 86400:
        notes.append(f"the calibration is {cal.age_text()} old: consider `orchard calibrate` again")
    measured, _ = samples.measured()
    unmeasured = sorted({spec.key for spec in samples.specs} - {spec.key for spec in measured})
    if unmeasured and decision.metrics:
        notes.append(f"unmeasured here (null in rows), not judged: {', '.join(unmeasured)}")
    for metric in decision.metrics:
        if metric.floor > 0.10:
            notes.append(f"{metric.key}: noise floor {metric.floor:.1%} is high; only large effects can be claimed")
    return notes
