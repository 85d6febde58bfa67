"""A shared-baseline campaign's rounds: per scenario, one baseline run and one run of every candidate still being
judged, in an order drawn from the campaign's seeded generator, all under the machine-wide lock. Each candidate's
pair of a round is (that round's baseline run, its own run); its gates are checked by its own tracker, as if it
had a campaign of its own. What the rounds give goes back to `shared_campaign.py`."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchard.bench.binary import binary_sha256
from orchard.bench.campaigns.pairs import IncomparableRows, check_binaries, check_comparable
from orchard.bench.checks.gates import GateTracker
from orchard.bench.deciding.verdict import GateResult
from orchard.bench.held_out.variant_watch import VariantWatch
from orchard.bench.lock import MeasurementLock
from orchard.bench.measuring import rows as rowlib
from orchard.bench.measuring.measure import Observation, RunSpec, Workbench, count_instructions, observe
from orchard.bench.results.store import RunWriter
from orchard.bench.suites.suite import Scenario, Suite

BASELINE = "baseline"


def role_of(index: int) -> str:
    """The name a candidate's runs go by in a round's order (rows keep the role "candidate")."""
    return f"candidate-{index + 1}"


@dataclass
class CandidatePair:
    """One candidate's share of a round, over every scenario: its pairs with the baseline's runs and its failed
    gates, or why its rows cannot be compared."""

    pairs: list[tuple[Observation, Observation]] = field(default_factory=list)
    failed_gates: list[GateResult] = field(default_factory=list)
    incomparable: str | None = None


class RoundRunner:
    """Measures the rounds of one shared-baseline campaign and records every run as a row."""

    def __init__(self, suite: Suite, bench: Workbench, baseline: Path, candidates: Sequence[Path], writer: RunWriter,
                 seed: int, lane: str, watches: Sequence[VariantWatch] = ()) -> None:
        self.suite = suite
        self.watches = list(watches)  # each candidate's held-out variants (their scenarios in `suite`), or none
        self.bench = bench
        self.binaries = {BASELINE: baseline, **{role_of(k): path for k, path in enumerate(candidates)}}
        self.writer = writer
        self.rng = random.Random(seed)
        self.seed = seed
        self.lock = MeasurementLock(f"orchard {lane} {suite.name} (shared baseline, {len(candidates)} candidates)")
        self.trackers = [GateTracker(suite.gates, suite.scenarios) for _ in candidates]
        self.metric_names = {spec.metric for spec in suite.metrics} | set(suite.recorded_only)
        self.per_binary: set[str] = set()  # scenarios whose instructions are counted per binary, not in the rounds
        self.hashes = {name: binary_sha256(path) for name, path in self.binaries.items()}
        self.base_meta = {
            "lane": lane, "suite": suite.name, "suite_digest": suite.digest, "seed": seed,
            "shared_candidates": len(candidates),
            **rowlib.comparability(fixture_id=suite.digest, env_isolation=bench.confinement.isolation),
            **rowlib.source_commit(),
        }

    def order(self, live: Sequence[int]) -> list[str]:
        """The baseline and the live candidates in the seeded generator's next order."""
        names = [BASELINE, *(role_of(k) for k in live)]
        self.rng.shuffle(names)
        return names

    def run_round(self, index: int, warmup: bool, live: Sequence[int]) -> tuple[list[Observation],
                                                                                 dict[int, CandidatePair]]:
        """One round over every scenario: (the baseline's observations, each live candidate's share)."""
        measured: list[tuple[Scenario, dict[str, Observation]]] = []
        with self.lock:
            for scenario in self.suite.scenarios:
                order = self.order(live)
                seen = {name: self._observe(scenario, name, index, warmup, order) for name in order}
                measured.append((scenario, seen))
        baselines = []
        shares = {k: CandidatePair() for k in live}
        for scenario, seen in measured:
            for name, observation in seen.items():
                # untimed instruction counts after the lock is released: they do not move with load
                if scenario.name in self.per_binary:
                    observation.row["instructions_counting"] = "per binary"
                else:
                    count_instructions(self.bench, scenario, self.binaries[name], observation)
                self.writer.write(observation.row)
            base = seen[BASELINE]
            baselines.append(base)
            for k in live:
                share, cand = shares[k], seen[role_of(k)]
                try:
                    check_comparable(base, cand)
                except IncomparableRows as error:
                    share.incomparable = share.incomparable or str(error)
                share.pairs.append((base, cand))
                share.failed_gates += self.trackers[k].check_pair(base, cand)
        for k in live if self.watches else ():
            shares[k].failed_gates += self.watches[k].pair(warmup, shares[k].pairs)
        check_binaries(self.binaries, self.hashes)
        return baselines, shares

    def _observe(self, scenario: Scenario, name: str, index: int, warmup: bool, order: Sequence[str]) -> Observation:
        role = BASELINE if name == BASELINE else "candidate"
        meta: dict[str, Any] = {
            **self.base_meta, **self.lock.metadata(), "pair": index, "warmup": warmup, "order": "-".join(order),
            "subject": name, "binary": str(self.binaries[name]), "binary_sha256": self.hashes[name],
        }
        subject = {"name": name, "kind": "binary", "label": str(self.binaries[name]),
                   "binary": str(self.binaries[name]), "binary_sha256": self.hashes[name]}
        spec = RunSpec(role, subject, index, meta, self.metric_names,
                       self.trackers[0].determinism_fields(scenario.name))
        return observe(self.bench, scenario, self.binaries[name], spec, count=False)
