"""A campaign's pairs: one baseline and one candidate run of every scenario, back to back in seeded order, under
the machine-wide lock; the warm-up pair, gates after every pair, the metrics judged at the planned looks. What
the pairs gave (`Measured`) goes back to `campaign.py`, which turns it into a verdict or a calibration."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchard.bench.binary import binary_sha256
from orchard.bench.campaigns.binary_counts import BinaryCounts
from orchard.bench.checks.first_runs import RunSeries
from orchard.bench.checks.gates import GateTracker
from orchard.bench.deciding import calibration as calibration_cache
from orchard.bench.deciding.decide import AdaptivePlan, decide_metrics, open_metrics
from orchard.bench.deciding.verdict import (
    GateResult,
    Method,
    MetricResult,
    MetricSpec,
    MetricVerdict,
    Unjudged,
)
from orchard.bench.held_out.variant_watch import VariantWatch
from orchard.bench.lock import MeasurementLock
from orchard.bench.measuring import rows as rowlib
from orchard.bench.measuring.measure import Observation, RunSpec, Workbench, count_instructions, observe
from orchard.bench.results.store import RunWriter
from orchard.bench.suites.suite import MAX_RUNS, MIN_RUNS_FLOOR, Scenario, Suite
from orchard.errors import OrchardError, UsageError

PairProgress = Callable[[int, int, str], None]  # (pairs done, pairs planned, note)


class BaselineFailed(OrchardError):
    """The baseline itself failed a scenario or gate: there is nothing to compare against."""


class IncomparableRows(OrchardError):
    """Baseline and candidate rows differ in a comparability key (transport, level, ...)."""


def quiet(done: int, total: int, note: str) -> None:
    pass


def check_runs(runs: int | None, suite: Suite) -> tuple[int, int]:
    """(min_runs, max_runs) for a campaign, refusing counts too small to judge."""
    max_runs = suite.runs if runs is None else runs
    if max_runs < MIN_RUNS_FLOOR:
        raise UsageError(
            f"--runs must be at least {MIN_RUNS_FLOOR} (got {max_runs}): fewer pairs cannot give an exact interval"
        )
    if max_runs > MAX_RUNS:
        raise UsageError(f"--runs must be at most {MAX_RUNS:,} (got {max_runs})")
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
        watch: VariantWatch | None = None,  # a verdict's held-out variants, its scenarios in `suite`
    ) -> None:
        self.suite = suite
        self.watch = watch
        self.bench = bench
        self.binaries = {"baseline": baseline, "candidate": candidate}
        self.writer = writer
        self.rng = random.Random(seed)
        self.seed = seed
        self.lock = MeasurementLock(f"orchard {lane} {suite.name}")
        self.tracker = GateTracker(suite.gates, suite.scenarios)
        self.retired: set[str] = set()  # scenarios no longer run: every judged metric of theirs decided exactly
        self.metric_names = {spec.metric for spec in suite.metrics} | set(suite.recorded_only)
        self.per_binary: set[str] = set()  # scenarios whose instructions are counted per binary, not per pair
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
            **rowlib.source_commit(),
        }

    def run_pair(self, index: int, warmup: bool) -> list[tuple[Observation, Observation, list[GateResult]]]:
        """One pair over every scenario; returns (baseline, candidate, failed gates) per scenario."""
        measured: list[tuple[Scenario, dict[str, Observation]]] = []
        with self.lock:
            for scenario in self.suite.scenarios:
                if {scenario.name, scenario.variant_of} & self.retired:
                    continue
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
                if scenario.name in self.per_binary:
                    observation.row["instructions_counting"] = "per binary"
                else:
                    count_instructions(self.bench, scenario, self.binaries[role], observation)
                self.writer.write(observation.row)
            base, cand = seen["baseline"], seen["candidate"]
            check_comparable(base, cand)
            results.append((base, cand, self.tracker.check_pair(base, cand)))
        if self.watch is not None and results:
            results[-1][2].extend(self.watch.pair(warmup, [(base, cand) for base, cand, _ in results]))
        check_binaries(self.binaries, {role: subject["binary_sha256"] for role, subject in self.subjects.items()})
        return results


def check_binaries(binaries: dict[str, Path], hashes: dict[str, str]) -> None:
    """Each binary hashed again after every pair: one swapped and restored mid-campaign is caught."""
    for role, path in binaries.items():
        try:
            now = binary_sha256(path)
        except OSError:
            now = "unreadable"
        if now != hashes[role]:
            raise IncomparableRows(f"the {role} binary {path} changed during the campaign: nothing measured "
                                   "since it was hashed counts")


def check_comparable(baseline: Observation, candidate: Observation) -> None:
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


def baseline_error(results: list[tuple[Observation, Observation, list[GateResult]]]) -> str | None:
    for base, _, _ in results:
        if not base.ok:
            return f"baseline failed scenario '{base.scenario}' ({base.failure}); nothing can be compared"
    return None


@dataclass(frozen=True)
class Refusal:
    """Why a verdict campaign compared nothing: its ERROR."""

    cause: Unjudged
    reason: str


@dataclass(frozen=True)
class Measured:
    """What a campaign's pairs gave: the metrics of its last look, or why it stopped before one."""

    metrics: list[MetricResult] = field(default_factory=list)
    pairs: int = 0  # judged pairs, the warm-up not counted
    failed_gates: list[GateResult] = field(default_factory=list)
    refusal: Refusal | None = None
    went_on: list[str] = field(default_factory=list)  # why it measured past `runs`: the metrics open there


def measure_pairs(runner: PairRunner, kept: tuple[Samples, RunSeries], cal: calibration_cache.Calibration,
                   plan: AdaptivePlan, progress: PairProgress, between_pairs: Callable[[], None]) -> Measured:
    """The warm-up pair, then pairs up to `plan.max_runs` (past it, up to `plan.last`, while a metric is open),
    judged at each look until every metric is settled.

    A gate failed, a failed baseline run or rows not comparable end the campaign at that pair. Every run, the
    warm-up's too, goes into the run series (a first run unlike the later ones is state between runs);
    `between_pairs` re-checks the binaries after each pair. Scenarios whose counts the A/A campaign found
    deterministic are counted per binary at the first look (`binary_counts.py`), not in every pair. A scenario
    whose judged metrics were all decided exactly at a look is not run in later pairs (`decided_exactly`).
    """
    samples, series = kept
    counts = BinaryCounts(runner.suite, cal, runner.bench, runner.binaries, runner.writer, runner.base_meta)
    runner.per_binary = counts.scenarios
    metrics: list[MetricResult] = []
    went_on: list[str] = []
    pairs = 0
    progress(0, plan.max_runs, f"pair order seed {runner.seed}; warm-up pair")
    for index in range(plan.last + 1):
        try:
            outcome = runner.run_pair(index, warmup=index == 0)
        except IncomparableRows as refusal:
            return Measured(metrics, pairs, refusal=Refusal(Unjudged.INCOMPARABLE_ROWS, str(refusal)), went_on=went_on)
        between_pairs()
        error = baseline_error(outcome)
        failed = [g for _, _, gs in outcome for g in gs]
        if error or failed:
            return Measured(metrics, pairs, failed, None if error is None else Refusal(Unjudged.BASELINE_FAILED,
                                                                                          error), went_on)
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
            metrics, still = judge_look(runner.suite, cal, counts, samples, (index, level))
            if plan.stops(index, still):
                break
            runner.retired |= decided_exactly(metrics)
            if index == plan.max_runs:
                went_on = open_metrics(metrics, plan.last)
                progress(index, plan.last, "going on past runs: " + "; ".join(went_on))
    return Measured(metrics, pairs, went_on=went_on)


def judge_look(suite: Suite, cal: calibration_cache.Calibration, counts: BinaryCounts, samples: Samples,
               look: tuple[int, float]) -> tuple[list[MetricResult], list[MetricResult]]:
    """A look at `look` = (pairs, level): every judged metric (those counted per binary from their counts, the
    rest from their pairs), and those a stop rule reads: a count per binary is final, more pairs do not change
    it, so an unclear one does not keep the campaign going."""
    index, level = look
    counted = {m.key: m for m in counts.judge(index, samples.values)}
    specs, values = samples.measured()
    decided = {m.key: counts.note(m) for m in decide_metrics(specs, values, noise_for(cal, specs), level)}
    judged = {**decided, **counted}
    metrics = [judged[spec.key] for spec in suite.metrics if spec.key in judged]
    return metrics, [m for m in metrics if m.key not in counted or m.verdict != MetricVerdict.UNCLEAR]


def decided_exactly(metrics: Sequence[MetricResult]) -> set[str]:
    """Scenarios whose judged metrics were all decided exactly at this look: deterministic in the A/A calibration
    and identical in every pair so far, so compared by value with no error probability (nothing of alpha or of
    Holm's split rests on them). Later pairs could only repeat those values, so a campaign stops running these
    scenarios; their gates have checked every pair up to the look (at least `min_runs`), and a statistical metric
    keeps its scenario running whatever its state (its interval is recomputed at every look)."""
    scenarios = {m.scenario for m in metrics}
    return {s for s in scenarios if all(m.method == Method.EXACT for m in metrics if m.scenario == s)}


def noise_for(cal: calibration_cache.Calibration, specs: Sequence[MetricSpec]) -> dict[str, Any]:
    missing = [spec.key for spec in specs if spec.key not in cal.metrics]
    if missing:
        raise OrchardError(
            f"the cached calibration has no noise figure for {', '.join(missing)}: run `orchard calibrate` again"
        )
    return {spec.key: cal.metrics[spec.key].noise() for spec in specs}
