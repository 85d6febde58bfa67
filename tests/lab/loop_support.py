"""Helpers for the research-loop tests: verdicts as the bench makes them (built by its own
`overall()` into its typed `Verdict`, the record `orchard verdict --json` prints), and hypotheses
in a lab.db."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orchard.bench.deciding.decide import overall
from orchard.bench.deciding.verdict import Direction, GateResult, Method, MetricResult, MetricVerdict, Scale, Verdict
from orchard.lab.db.state import LabState
from orchard.lab.loop import backlog
from orchard.lab.records.agent_usage import AgentUsage
from orchard.lab.records.candidate import Candidate
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.records.report_reading import ReportReading, ReportState
from orchard.lab.workers.workspace.report import SCHEMA, write_report

# A target whose run.sh prints 400 lines (its orchard.toml table), the win that prints 40, and a suite
# measuring its stdout.
RUN_SH_TARGET = {"build": "true", "binary": "run.sh"}
OLD = 'i=0; while [ $i -lt 400 ]; do echo "line $i"; i=$((i+1)); done\n'
WIN = 'i=0; while [ $i -lt 40 ]; do echo "line $i"; i=$((i+1)); done\n'
STDOUT_SUITE = """
[suite]
name = "stdout"
runs = 6
min_runs = 6
calibration_runs = 6
plausible = 20  # the 11x win is believed without held-out inputs

[[scenario]]
name = "out"
command = ["{bin}"]

[[metric]]
name = "stdout_bytes"
floor = 0.0
"""


def metric(key: str, verdict: str, effect: float, *, interval: tuple[float, float] | None = None,
           floor: float = 0.03, n: int = 20, baseline: float = 100.0, direction: str = "lower",
           target: bool = True, mde: float | None = 0.05) -> MetricResult:
    """One metric's result; the candidate's median follows from the baseline and the effect."""
    scenario, name = key.split("/")
    return MetricResult(
        scenario=scenario, metric=name, direction=Direction(direction), target=target,
        verdict=MetricVerdict(verdict), method=Method.HODGES_LEHMANN, scale=Scale.LOG_RATIO, effect=effect,
        interval=interval or (effect - 0.01, effect + 0.01), confidence=0.9, floor=floor, n=n, mde=mde,
        baseline_median=baseline, candidate_median=round(baseline * (1 + effect), 6),
    )


def verdict_of(metrics: Sequence[MetricResult], gates: Sequence[tuple[str, bool, str]] = ()) -> Verdict:
    """The verdict for these results, read back from the JSON `orchard verdict --json` prints and lab.db stores."""
    decision = overall(list(metrics), [GateResult(*gate) for gate in gates])
    verdict = Verdict(
        verdict=decision.verdict, reasons=decision.reasons, baseline=Path("baseline"), candidate=Path("candidate"),
        metrics=decision.metrics, gates=decision.gates, suite="suite.toml", seed=7,
        pairs=max((m.n for m in metrics), default=0), planned_pairs=20, rows=Path("results/verdict/run.jsonl"),
        summary=Path("results/verdict/run.md"),
    )
    return Verdict.from_dict(json.loads(json.dumps(verdict.to_dict())))


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
        rows = [(r.id, r.status, r.source, r.hypothesis.to_dict()) for r in state.hypotheses()]
        events = [(e.id, e.at, e.kind, e.experiment, e.event.to_dict()) for e in state.events()]
        return hashlib.sha256(json.dumps([rows, events], default=str, sort_keys=True).encode()).hexdigest()
    finally:
        state.close()


# A command-template fragment (no braces but the placeholders) writing the report a worker that finished writes.
FINISHED = ("python3 -c \"import json, sys; json.dump(dict(schema='orchard.worker-report/1', experiment=sys.argv[2], "
            "status='done', summary='done', measurements=[]), open(sys.argv[1], 'w'))\" {report} {experiment}")


def write_finished_report(path: Path, experiment: str) -> None:
    """The report a worker that finished writes (one that wrote none did not finish, and is not judged)."""
    write_report(path, {"schema": SCHEMA, "experiment": experiment, "status": "done", "summary": "edited",
                        "measurements": []})


def bare_candidate(**fields: Any) -> Candidate:
    """A collected candidate with nothing in it but `fields` (for rules that read only a few)."""
    values: dict[str, Any] = {
        "experiment": "x", "worker": "w1", "target_base": "", "bench_base": "", "target_head": "", "patch": "",
        "changed_files": [], "scope": [], "scope_violations": [], "bench_changes": [], "bench_head": "",
        "report": ReportReading(ReportState.MISSING, ""), "log_path": "", "exit_code": 0, "signal": None,
        "duration_s": 0.0,
        "started_at": "", "usage": AgentUsage(), "flags": [],
    }
    return Candidate(**(values | fields))
