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
from orchard.lab.db_records import ExperimentRecord, HypothesisRecord, JournalEvent
from orchard.lab.judgment import Decision, JudgmentEntry
from orchard.lab.markdown import inline
from orchard.lab.publication import Publication
from orchard.lab.sandbox import UNSANDBOXED_NOTE, SandboxMode
from orchard.lab.start import LAB_START, LabStart, recorded_start
from orchard.lab.state import LabState
from orchard.lab.verdict_table import (
    COLUMNS,
    MetricEffect,
    after_pairs,
    cells,
    effect_cells,
    num,
)
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
        lines.append(f"\ngate `{gate.name}`: {'pass' if gate.passed else 'FAIL'} ({inline(gate.detail)})")
    return lines


def _verdict_head(verdict: Verdict) -> str:
    return f"**{verdict.verdict}** {after_pairs(verdict.pairs)} (seed {verdict.seed})"


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
        lines.append(f"Worker `{data['worker']}` ({data['lane']} lane, launcher `{data.get('launcher', '?')}`) "
                     f"takes hypothesis `{data['hypothesis']}` at base `{data['base'][:12]}`: "
                     f"{inline(data.get('title', ''))}")
        if data.get("executor") == "dask":
            lines.append(f"Submitted to the dask cluster `{data.get('scheduler', '')}`; log: `{data.get('log', '')}`.")
        else:
            lines.append(f"Prompt: `{data.get('prompt', '')}`; log: `{data.get('log', '')}`.")
    elif kind == "experiment-host":
        lines.append(f"Runs on host `{data['host']}` (dask worker `{data['address']}`)"
                     + (f"; re-queued: its dask worker `{data['requeued_from']}` was lost." if data.get("requeued_from")
                        else "."))
    elif kind == "judgment":
        entry = JudgmentEntry.from_dict(data)
        lines.append(f"**{entry.decision}** · hypothesis `{entry.hypothesis}`: {inline(entry.title)}")
        lines.append("")
        if entry.sandbox == SandboxMode.NONE:
            lines += [f"**{UNSANDBOXED_NOTE}.**", ""]
        lines.append(f"Hypothesis: {inline(entry.metric)} · predicted {entry.predicted} · cause: {inline(entry.cause)}")
        lines.append("")
        lines += [f"- {inline(reason)}" for reason in entry.reasons]
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
                lines += [f"- verdict: {_verdict_head(verdict)}: " + inline("; ".join(verdict.reasons)), ""]
                lines += verdict_lines(verdict) + [""]
            elif isinstance(value, (dict, list)):
                lines.append(f"- {inline(key)}: {inline(json.dumps(value, default=str))}")
            else:
                lines.append(f"- {inline(key)}: {inline(value)}")
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
    effect: MetricEffect | None = None  # the best change's own paired effect
    final: MetricEffect | None = None  # main at the end against main at the start, one paired verdict

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
                entry.effect = MetricEffect.from_metric(metric)
    for measurement in state.measurements("main"):
        for key, value in measurement.metrics.items():
            if key in board and value is not None:
                board[key].main = value
    final = _final_verdict(state)
    for metric in [] if final is None else final.metrics:
        if metric.key in board:
            board[metric.key].final = MetricEffect.from_metric(metric)
    return list(board.values())


def _final_verdict(state: LabState) -> Verdict | None:
    done = state.events("final-verdict")
    data = done[-1].data.get("verdict") if done else None
    return None if data is None else Verdict.from_dict(data)


def render_leaderboard(state: LabState) -> str:
    """Each metric's best change with its own paired effect, and main against the start once the lab stopped.

    Every number is an effect with its interval from one paired verdict; no
    median of one campaign is divided by a median of another.
    """
    lines = ["# Leaderboard", "",
             ("Per metric: the landed change with the best paired effect, and main at the end "
              "against main at the start (one paired verdict, when the lab stops)."), "",
             ("| metric | direction | baseline (start) | best change | its effect [interval] | main vs start "
              "[interval] | floor |"), "|---|---|---:|---|---:|---:|---:|"]
    dirs = directions(state)
    for row in leaderboard(state):
        change = "-" if row.effect is None else f"`{row.by}` ({(row.commit or '')[:10]})"
        lines.append("| " + " | ".join([inline(row.metric), f"{dirs.get(row.metric, 'lower')} is better",
                                         num(row.baseline), change, *effect_cells(row.effect, row.final)]) + " |")
    return "\n".join(lines) + "\n"


def final_lines(state: LabState) -> list[str]:
    """Main at the end against main at the start, as one paired verdict (never a ratio of unpaired medians)."""
    done = state.events("final-verdict")
    lines = ["## Main at the end against main at the start", ""]
    if not done:
        return [*lines, "Not measured yet: the lab measures it when it stops."]
    data = done[-1].data
    if not data.get("moved"):
        return [*lines, f"Main did not move from `{data['start'][:10]}`: nothing to compare."]
    verdict = Verdict.from_dict(data["verdict"])
    summary = (f"One paired verdict of main `{data['end'][:10]}` against main at the start "
               f"`{data['start'][:10]}` (same suite, same lock, interleaved pairs): {_verdict_head(verdict)}.")
    return [*lines, summary, "", *verdict_lines(verdict)]


def render_final_report(state: LabState, next_backlog: Sequence[HypothesisRecord]) -> str:
    stop = state.events("stop")
    reason = stop[-1].data.get("reason", "") if stop else "the lab has not stopped"
    experiments = state.experiments()
    landed = [e for e in experiments if e.decision == Decision.LAND]
    killed = [e for e in experiments if e.decision == Decision.KILL]
    iterated = [e for e in experiments if e.decision == Decision.ITERATE]
    lines = ["# Final report", "", f"Stopped: {inline(reason)}.", "",
             f"{len(experiments)} experiments: {len(landed)} landed, {len(killed)} killed, {len(iterated)} iterated.",
             "",
             *final_lines(state)]
    lines += ["", "## Landed changes", ""]
    published = {event.experiment: event.data for event in state.events("publish")}
    for e in landed:
        lines.append(f"- `{e.name}` on `{e.branch}`{_via(e)} ({inline(_landing_state(e, published.get(e.name)))}): "
                     + inline("; ".join(e.reasons)))
    if not landed:
        lines.append("- none")
    where = json.loads(state.meta("publication") or "{}")
    if where:
        lines += ["", "## In your repository", "",
                  f"Wins are published to `{where['repo']}` as `lab/<experiment>` branches and `{where['ref']}`"
                  + ("." if where["ref"] == where["main"] else
                     f" (your `{where['main']}` is checked out there and never pushed to). To see and take them:"),
                  "", "```", *Publication(**where).commands(), "```"]
    failures = state.events("launcher-failure")
    if failures:
        lines += ["", "## Launcher failures (the hypotheses went back to the backlog)", ""]
        lines += [f"- `{e.experiment}` (hypothesis `{e.data['hypothesis']}`): {inline(e.data['reason'])}"
                  for e in failures]
    lines += ["", "## Killed hypotheses", ""]
    for e in killed:
        named = "" if e.name == e.hypothesis else f" (hypothesis `{e.hypothesis}`)"
        lines.append(f"- `{e.name}`{named}{_via(e)}: " + inline("; ".join(e.reasons)))
    if not killed:
        lines.append("- none")
    if iterated:
        lines += ["", "## Sent back to the backlog (ITERATE)", ""]
        lines += [f"- `{e.name}`: " + inline("; ".join(e.reasons)) for e in iterated]
    lines += ["", "## Recommended next backlog", ""]
    for item in next_backlog:
        h = item.hypothesis
        lines.append(f"- `{h.id}` (score {h.score:.2f}, {h.lane}): {inline(h.title)}")
    if not next_backlog:
        lines.append("- the backlog is empty: run `orchard plan` or `orchard backlog add`")
    cost = _total_cost(experiments)
    if cost:
        lines += ["", "## Agent cost", "", ", ".join(f"{k}: {num(v)}" for k, v in cost.items())]
    return "\n".join(lines) + "\n"


def _via(experiment: ExperimentRecord) -> str:
    """Which launcher ran the experiment (hypotheses may name their own)."""
    launcher = None if experiment.candidate is None else experiment.candidate.launcher
    return f" via `{launcher}`" if launcher else ""


def _landing_state(experiment: ExperimentRecord, publish: Mapping[str, Any] | None) -> str:
    """Merged only when the merge is reachable in the target repository; otherwise say what it is."""
    if not experiment.merge_commit:
        return "branch kept, not merged"
    if publish is None or not publish.get("reachable"):
        why = (publish or {}).get("error", "not published yet")
        return f"merged in the lab's clone as `{experiment.merge_commit[:10]}`, NOT reachable in the target: {why}"
    return f"merged as `{experiment.merge_commit[:10]}`, on `{publish['branch']}` in the target"


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
