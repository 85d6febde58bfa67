"""State between runs: a candidate whose first run is much slower than its later runs, while the baseline's is not.

Confined runs (`confinement.py`) start with a fresh HOME and TMPDIR and a
read-only file system, so a cache kept from one run to the next is
impossible there. This check catches what confinement cannot stop, or a
campaign run unconfined: a candidate that computes once and answers later
runs from somewhere it kept (a cache, a server left on loopback). Its first
run (the warm-up pair's) is slow and every later one fast; an honest
binary's first run costs about as much extra as the baseline's (a cold
page cache hits both alike). Such a metric is never claimed improved: it
becomes inconclusive, with the reason `state between runs`.

Wall time alone is a weak witness on a loaded machine: any one run can
take twice its median while another process has the CPU (the demo's honest
count-with-dict was flagged so in a clean-clone CI run). A first run slow in
wall time but not in its own CPU time (the scenario's cpu_ms, recorded for
every scenario) is flagged only when it is `WAITED_FACTOR` times its later
runs, beyond what load does to a run; one slow in CPU time too is flagged
from `FACTOR` on, as is any other metric.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from orchard.bench.deciding.noise_advice import CPU, WALL
from orchard.bench.deciding.verdict import Direction, MetricResult, MetricSpec, MetricVerdict
from orchard.bench.measuring.measure import Observation

FACTOR = 2.0  # the candidate's first run at least this many times its later runs' median
EXCESS = 2.0  # and its extra time at least this many times the baseline's first-run extra
WAITED_FACTOR = 4.0  # a wall-time first run this many times its later runs while its CPU time was not slow
MIN_LATER = 3
NOTE = "state between runs"


@dataclass
class RunSeries:
    """Every run's value per metric and role, in the order measured (the warm-up pair first)."""

    specs: Sequence[MetricSpec]
    values: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    def add(self, baseline: Observation, candidate: Observation) -> None:
        for spec in self.specs:
            if spec.scenario != baseline.scenario:
                continue
            for observation in (baseline, candidate):
                value = observation.values.get(spec.metric)
                if value is not None:
                    self.values.setdefault((observation.role, spec.key), []).append(float(value))

    def _costs(self, role: str, spec: MetricSpec) -> tuple[float, float, float] | None:
        """(first run's cost, the later runs' median, their largest) for one role; a higher-is-better
        metric's cost is its inverse."""
        series = self.values.get((role, spec.key), [])
        if len(series) < MIN_LATER + 1:
            return None
        if spec.direction != "lower":
            if any(v <= 0 for v in series):
                return None
            series = [1.0 / v for v in series]
        later = series[1:]
        return series[0], statistics.median(later), max(later)

    def _waited(self, spec: MetricSpec) -> bool:
        """A wall-time metric whose candidate's first run was not slow in its own CPU time: a slow first run there
        is time spent waiting (for the CPU another process held, or for something outside the process)."""
        if spec.metric != WALL:
            return False
        cpu = MetricSpec(spec.scenario, CPU, Direction.LOWER)
        cand, base = self._costs("candidate", cpu), self._costs("baseline", cpu)
        return cand is not None and base is not None and not _slow_first(cand, base)

    def flag(self, metrics: Sequence[MetricResult]) -> tuple[list[MetricResult], list[str]]:
        """`metrics` with every improvement that only shows after a slow first run made inconclusive."""
        specs = {spec.key: spec for spec in self.specs}
        out, notes = [], []
        for metric in metrics:
            spec = specs.get(metric.key)
            cand = None if spec is None else self._costs("candidate", spec)
            base = None if spec is None else self._costs("baseline", spec)
            if (metric.verdict == MetricVerdict.IMPROVED and spec is not None and cand is not None
                    and base is not None and _slow_first(cand, base, self._waited(spec))):
                said = (f"{NOTE}: the candidate's first run of {metric.scenario} was {_ratio(cand):.1f}x its later "
                        f"runs on {metric.metric} (the baseline's {_ratio(base):.1f}x); not claimed as a win")
                metric = dataclasses.replace(metric, verdict=MetricVerdict.UNCLEAR, note=said)
                notes.append(f"{metric.key}: {said}")
            out.append(metric)
        return out, notes


def _ratio(costs: tuple[float, float, float]) -> float:
    first, median, _ = costs
    return first / median if median > 0 else 1.0


def _slow_first(cand: tuple[float, float, float], base: tuple[float, float, float], waited: bool = False) -> bool:
    """Much slower first (`WAITED_FACTOR` times when only waiting made it so), slower than every later run, and by
    far more than the baseline's first run."""
    first, median, later_max = cand
    return (_ratio(cand) >= (WAITED_FACTOR if waited else FACTOR) and first > later_max
            and first - median > EXCESS * max(base[0] - base[1], 0.0))
