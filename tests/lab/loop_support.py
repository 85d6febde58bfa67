"""Helpers for the research-loop tests: verdicts in the exact shape `orchard verdict --json`
prints (built by the bench's own `overall()` and `verdict_json()`), and hypotheses in a lab.db."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orchard.bench.campaign import CampaignResult
from orchard.bench.display import verdict_json
from orchard.bench.verdict import GateResult, MetricResult, overall
from orchard.lab import backlog
from orchard.lab.hypothesis import Hypothesis
from orchard.lab.state import LabState


def metric(key: str, verdict: str, effect: float, *, interval: tuple[float, float] | None = None,
           floor: float = 0.03, n: int = 20, baseline: float = 100.0, direction: str = "lower",
           target: bool = True, mde: float | None = 0.05) -> MetricResult:
    """One metric's result; the candidate's median follows from the baseline and the effect."""
    scenario, name = key.split("/")
    return MetricResult(
        scenario=scenario, metric=name, direction=direction, target=target, verdict=verdict,
        method="hodges-lehmann", scale="log-ratio", effect=effect,
        interval=interval or (effect - 0.01, effect + 0.01), confidence=0.9, floor=floor, n=n, mde=mde,
        baseline_median=baseline, candidate_median=round(baseline * (1 + effect), 6),
    )


def verdict_of(metrics: Sequence[MetricResult], gates: Sequence[tuple[str, bool, str]] = ()) -> dict[str, Any]:
    """The verdict document for these results, as `orchard verdict --json` prints and lab.db stores it."""
    decision = overall(list(metrics), [GateResult(*gate) for gate in gates])
    pairs = max((m.n for m in metrics), default=0)
    result = CampaignResult(
        decision=decision, seed=7, pairs=pairs, planned_pairs=20, calibration=None, calibration_cached=False,
        rows_path=Path("results/verdict/run.jsonl"), summary_path=Path("results/verdict/run.md"), warnings=[],
        lock_wait_ms=0.0, baseline=Path("baseline"), candidate=Path("candidate"),
    )
    return json.loads(json.dumps(verdict_json(result, "suite.toml")))


def add_hypotheses(state: LabState, *specs: dict[str, Any], source: str = "user") -> list[str]:
    """Add hypotheses given as keyword dicts (id and scope at least; a metric by default)."""
    ids = []
    for spec in specs:
        fields = {"metric": "report/wall_ms", "change": f"try {spec['id']}", **spec}
        fields["scope"] = tuple(fields.get("scope", ()))
        ids.append(backlog.add(state, Hypothesis(**fields), source=source))
    return ids


def snapshot(workspace_root: Path) -> str:
    """What lab.db holds of the backlog and the journal (a refused command must leave it exactly so)."""
    state = LabState.open(workspace_root)
    try:
        rows = [(r.id, r.status, r.source, r.data) for r in state.hypotheses()]
        return hashlib.sha256(json.dumps([rows, state.events()], default=str, sort_keys=True).encode()).hexdigest()
    finally:
        state.close()
