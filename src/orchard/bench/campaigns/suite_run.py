"""`orchard bench run`: measure a suite for several named subjects, no verdict.

Runs are interleaved: each run measures every subject once, in an order
shuffled per run from a printed seed, so drift is spread evenly over the
subjects instead of landing on whichever came last. Every run is confined as
a verdict's are (`confinement.py`; the suite's `confine = false` turns it
off), so no subject keeps state from one run to the next.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from pathlib import Path

from orchard.bench.binary import binary_sha256
from orchard.bench.lock import MeasurementLock
from orchard.bench.measuring import rows as rowlib
from orchard.bench.measuring.measure import RunSpec, observe, workbench
from orchard.bench.results.display import rows_summary
from orchard.bench.results.store import RunWriter
from orchard.bench.sandbox.confinement import for_campaign
from orchard.bench.suites.suite import Suite
from orchard.errors import UsageError


def run_suite(
    suite: Suite,
    subjects: Mapping[str, Path],
    *,
    runs: int,
    seed: int,
    results: Path,
    progress: Callable[[int, int], None],
) -> RunWriter:
    """Measure every scenario `runs` times per subject; returns the closed writer."""
    if runs < 1:
        raise UsageError(f"--runs must be at least 1 (got {runs})")
    rng = random.Random(seed)
    info = {
        name: {"name": name, "kind": "binary", "label": str(path), "binary_sha256": binary_sha256(path)}
        for name, path in subjects.items()
    }
    names = {spec.metric for spec in suite.metrics} | set(suite.recorded_only)
    lock = MeasurementLock(f"orchard bench run {suite.name}")
    confinement = for_campaign(suite.confine, suite.directory, *subjects.values())
    meta = {"lane": "bench", "suite": suite.name, "suite_digest": suite.digest, "seed": seed,
            **rowlib.comparability(fixture_id=suite.digest, env_isolation=confinement.isolation),
            **rowlib.source_commit()}
    with workbench(suite, confinement=confinement) as bench, RunWriter(results, "bench", rows_summary) as writer:
        for run in range(1, runs + 1):
            order = list(subjects)
            rng.shuffle(order)
            with lock:
                for scenario in suite.scenarios:
                    for name in order:
                        metadata = {**meta, **lock.metadata(), "order": "-".join(order),
                                    "binary": str(subjects[name]), "binary_sha256": info[name]["binary_sha256"]}
                        spec = RunSpec(name, info[name], run, metadata, names)
                        observation = observe(bench, scenario, subjects[name], spec)
                        writer.write(observation.row)
            progress(run, runs)
    lock.print_total()
    return writer
