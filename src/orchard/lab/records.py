"""The lab notebook: JOURNAL.md, LEADERBOARD.md, FINAL_REPORT.md, report.html.

All four are rendered from lab.db, whole, every time, and replaced
atomically: a colleague reading them the next morning sees exactly what the
database says, and a crash mid-write leaves the previous version intact.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchard.lab import backlog
from orchard.lab.judgment import Decision, JudgmentEntry
from orchard.lab.start import LAB_START, LabStart, recorded_start
from orchard.lab.state import ExperimentRecord, HypothesisRecord, JournalEvent, LabState
from orchard.lab.verdict_table import COLUMNS, MetricEffect, cells, num, pct
from orchard.lab.verdicts import MetricResult, MetricVerdict, Verdict


def when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def verdict_lines(verdict: Verdict | None) -> list[str]:
    """A verdict as a Markdown table: one line per metric, then its gates."""
    if verdict is None:
        return []
    lines = ["| " + " | ".join(COLUMNS) + " |", "|---|---|---:|---|---:|---:|---:|---:|---:|"]
    for m in verdict.metrics:
        lines.append("| " + " | ".join(cells(MetricEffect.from_metric(m))) + " |")
    for gate in verdict.gates:
        lines.append(f"\ngate `{gate.name}`: {'pass' if gate.passed else 'FAIL'} ({gate.detail})")
    return lines


def _verdict_head(verdict: Verdict) -> str:
    return f"**{verdict.verdict}** after {verdict.pairs} pairs (seed {verdict.seed})"


def journal_entry(event: JournalEvent) -> list[str]:
    data = event.data
    kind = event.kind
    head = f"## {when(event.at)} · {kind}" + (f" · {event.experiment}" if event.experiment else "")
    lines = [head, ""]
    if kind == LAB_START:
        start = LabStart.from_dict(data)
        lines.append(f"Target base `{start.base[:12]}`; bench `{start.bench_base[:12]}`.")
        lines.append(f"Calibration: {start.calibration}")
        lines.append("")
        lines += ["| metric | baseline median | noise floor |", "|---|---:|---:|"]
        for key, value in sorted(start.baseline.items()):
            floor = start.floors.get(key)
            lines.append(f"| {key} | {num(value)} | {'-' if floor is None else f'{floor:.2%}'} |")
    elif kind == "experiment-start":
        lines.append(f"Worker `{data['worker']}` ({data['lane']} lane) takes hypothesis `{data['hypothesis']}` "
                     f"at base `{data['base'][:12]}`: {data.get('title', '')}")
        lines.append(f"Prompt: `{data.get('prompt', '')}`; log: `{data.get('log', '')}`.")
    elif kind == "judgment":
        entry = JudgmentEntry.from_dict(data)
        lines.append(f"**{entry.decision}** · hypothesis `{entry.hypothesis}`: {entry.title}")
        lines.append("")
        lines.append(f"Hypothesis: {entry.metric} · predicted {entry.predicted} · cause: {entry.cause}")
        lines.append("")
        lines += [f"- {reason}" for reason in entry.reasons]
        if entry.verdict is not None:
            lines += ["", f"Verdict {_verdict_head(entry.verdict)}:", ""]
            lines += verdict_lines(entry.verdict)
        usage = entry.usage or {}
        if any(v is not None for v in usage.values()):
            lines += ["", "Agent cost: " + ", ".join(f"{k} {num(v)}" for k, v in usage.items() if v is not None)]
    else:
        for key, value in data.items():
            if key == "verdict" and isinstance(value, Mapping):
                verdict = Verdict.from_dict(value)
                lines += [f"- verdict: {_verdict_head(verdict)}: " + "; ".join(verdict.reasons), ""]
                lines += verdict_lines(verdict) + [""]
            elif isinstance(value, (dict, list)):
                lines.append(f"- {key}: {json.dumps(value, default=str)}")
            else:
                lines.append(f"- {key}: {value}")
    return lines + [""]


def render_journal(state: LabState) -> str:
    lines = ["# Lab journal", "", "Every judgment, landing and stop, oldest first. Rendered from lab.db.", ""]
    for event in state.events():
        lines += journal_entry(event)
    return "\n".join(lines)


def directions(state: LabState) -> dict[str, str]:
    raw = state.meta("metric_directions")
    return json.loads(raw) if raw else {}


def _better(a: float, b: float, direction: str) -> bool:
    return a < b if direction == "lower" else a > b


@dataclass
class LeaderboardRow:
    """One metric: its lab-start baseline, the best landed value and the change that got it, main now."""

    metric: str
    baseline: float
    best: float
    main: float
    by: str = "baseline"  # the experiment, or "baseline" while nothing beat it
    commit: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def leaderboard(state: LabState) -> list[LeaderboardRow]:
    """Per metric: baseline, best value from a landed change, current main."""
    start = recorded_start(state)
    baseline = {} if start is None else start.baseline
    dirs = directions(state)
    board = {key: LeaderboardRow(key, value, value, value) for key, value in baseline.items()}
    for experiment in state.experiments():
        if experiment.decision != Decision.LAND or experiment.judgment is None:
            continue
        for metric in _metrics(experiment):
            entry = board.get(metric.key)
            value = metric.candidate_median
            if entry is None or value is None:
                continue
            if metric.verdict == MetricVerdict.IMPROVED and _better(value, entry.best, dirs.get(metric.key, "lower")):
                entry.best, entry.by = value, experiment.name
                entry.commit = experiment.merge_commit or experiment.land_commit
    for measurement in state.measurements("main"):
        for key, value in measurement.metrics.items():
            if key in board and value is not None:
                board[key].main = value
    return list(board.values())


def render_leaderboard(state: LabState) -> str:
    lines = ["# Leaderboard", "", "Best known value per metric and the change that achieved it.", "",
             "| metric | direction | baseline | best | change | vs baseline | main now |",
             "|---|---|---:|---:|---|---:|---:|"]
    dirs = directions(state)
    for row in leaderboard(state):
        change = row.by if row.by == "baseline" else f"`{row.by}` ({(row.commit or '')[:10]})"
        delta = (row.best / row.baseline - 1) if row.baseline else None
        lines.append(
            f"| {row.metric} | {dirs.get(row.metric, 'lower')} is better | {num(row.baseline)} | "
            f"{num(row.best)} | {change} | {pct(delta)} | {num(row.main)} |"
        )
    return "\n".join(lines) + "\n"


def render_final_report(state: LabState, next_backlog: Sequence[HypothesisRecord]) -> str:
    stop = state.events("stop")
    reason = stop[-1].data.get("reason", "") if stop else "the lab has not stopped"
    experiments = state.experiments()
    landed = [e for e in experiments if e.decision == Decision.LAND]
    killed = [e for e in experiments if e.decision == Decision.KILL]
    iterated = [e for e in experiments if e.decision == Decision.ITERATE]
    lines = [
        "# Final report",
        "",
        f"Stopped: {reason}.",
        "",
        f"{len(experiments)} experiments: {len(landed)} landed, {len(killed)} killed, {len(iterated)} iterated.",
        "",
        "## Per metric: baseline to final",
        "",
        "| metric | baseline | final (main) | change |",
        "|---|---:|---:|---:|",
    ]
    for row in leaderboard(state):
        delta = (row.main / row.baseline - 1) if row.baseline else None
        lines.append(f"| {row.metric} | {num(row.baseline)} | {num(row.main)} | {pct(delta)} |")
    lines += ["", "## Landed changes", ""]
    for e in landed:
        merged = f"merged as `{e.merge_commit[:10]}`" if e.merge_commit else "pushed branch, not merged"
        lines.append(f"- `{e.name}` on `{e.branch}` ({merged}): " + "; ".join(e.reasons))
    if not landed:
        lines.append("- none")
    lines += ["", "## Killed hypotheses", ""]
    for e in killed:
        lines.append(f"- `{e.name}` (hypothesis `{e.hypothesis}`): " + "; ".join(e.reasons))
    if not killed:
        lines.append("- none")
    if iterated:
        lines += ["", "## Sent back to the backlog (ITERATE)", ""]
        lines += [f"- `{e.name}`: " + "; ".join(e.reasons) for e in iterated]
    lines += ["", "## Recommended next backlog", ""]
    for item in next_backlog:
        h = item.hypothesis
        lines.append(f"- `{h.id}` (score {h.score:.2f}, {h.lane}): {h.title}")
    if not next_backlog:
        lines.append("- the backlog is empty: run `orchard plan` or `orchard backlog add`")
    cost = _total_cost(experiments)
    if cost:
        lines += ["", "## Agent cost", "", ", ".join(f"{k}: {num(v)}" for k, v in cost.items())]
    return "\n".join(lines) + "\n"


def _metrics(experiment: ExperimentRecord) -> list[MetricResult]:
    verdict = None if experiment.judgment is None else experiment.judgment.verdict
    return [] if verdict is None else verdict.metrics


def _total_cost(experiments: Sequence[ExperimentRecord]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for e in experiments:
        usage = {} if e.candidate is None else e.candidate.usage.to_dict()
        for key, value in usage.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                totals[key] = totals.get(key, 0.0) + value
    return totals


def next_backlog(state: LabState, top: int = 6) -> list[HypothesisRecord]:
    return backlog.ranked(state)[:top]


def write_notebook(root: Path, state: LabState, *, final: bool = False) -> None:
    """Render every record from lab.db into the workspace (with the final report when `final`)."""
    write_atomic(root / "JOURNAL.md", render_journal(state))
    write_atomic(root / "LEADERBOARD.md", render_leaderboard(state))
    write_atomic(root / "backlog.md", backlog.render(state))
    if final:
        write_atomic(root / "FINAL_REPORT.md", render_final_report(state, next_backlog(state)))
        # pages reads the lab through view, which reads these records: imported here, not at the top
        from orchard.lab import pages, view
        from orchard.lab.workspace import Workspace

        write_atomic(root / "report.html", pages.report_html(view.build(Workspace.open(root), state, live=False)))
