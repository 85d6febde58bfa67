"""The lab notebook: JOURNAL.md, LEADERBOARD.md, FINAL_REPORT.md, report.html.

All four are rendered from lab.db, whole, every time, and replaced
atomically: a colleague reading them the next morning sees exactly what the
database says, and a crash mid-write leaves the previous version intact.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from orchard.lab import backlog
from orchard.lab.state import LabState
from orchard.lab.verdict_table import COLUMNS, MetricEffect, cells, num, pct


def when(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def verdict_lines(verdict: Mapping[str, Any] | None) -> list[str]:
    """A verdict as a Markdown table: one line per metric, then its gates."""
    if not verdict:
        return []
    lines = ["| " + " | ".join(COLUMNS) + " |", "|---|---|---:|---|---:|---:|---:|---:|---:|"]
    for m in verdict.get("metrics", []):
        lines.append("| " + " | ".join(cells(MetricEffect.from_verdict_metric(m))) + " |")
    for gate in verdict.get("gates", []):
        lines.append(f"\ngate `{gate['name']}`: {'pass' if gate['passed'] else 'FAIL'} ({gate['detail']})")
    return lines


def journal_entry(event: Mapping[str, Any]) -> list[str]:
    data = event["data"]
    kind = event["kind"]
    head = f"## {when(event['at'])} · {kind}" + (f" · {event['experiment']}" if event["experiment"] else "")
    lines = [head, ""]
    if kind == "lab-start":
        lines.append(f"Target base `{data['base'][:12]}`; bench `{data.get('bench_base', '')[:12]}`.")
        lines.append(f"Calibration: {data.get('calibration', '-')}")
        lines.append("")
        lines += ["| metric | baseline median | noise floor |", "|---|---:|---:|"]
        for key, value in sorted(data.get("baseline", {}).items()):
            floor = data.get("floors", {}).get(key)
            lines.append(f"| {key} | {num(value)} | {'-' if floor is None else f'{floor:.2%}'} |")
    elif kind == "experiment-start":
        lines.append(f"Worker `{data['worker']}` ({data['lane']} lane) takes hypothesis `{data['hypothesis']}` "
                     f"at base `{data['base'][:12]}`: {data.get('title', '')}")
        lines.append(f"Prompt: `{data.get('prompt', '')}`; log: `{data.get('log', '')}`.")
    elif kind == "judgment":
        lines.append(f"**{data['decision']}** · hypothesis `{data['hypothesis']}`: {data.get('title', '')}")
        lines.append("")
        lines.append(f"Hypothesis: {data.get('metric', '')} · predicted {data.get('predicted', '-')} · "
                     f"cause: {data.get('cause', '-')}")
        lines.append("")
        lines += [f"- {reason}" for reason in data.get("reasons", [])]
        verdict = data.get("verdict")
        if verdict:
            lines += ["", f"Verdict **{verdict['verdict']}** after {verdict.get('pairs')} pairs "
                          f"(seed {verdict.get('seed')}):", ""]
            lines += verdict_lines(verdict)
        usage = data.get("usage") or {}
        if any(v is not None for v in usage.values()):
            lines += ["", "Agent cost: " + ", ".join(f"{k} {num(v)}" for k, v in usage.items() if v is not None)]
    else:
        for key, value in data.items():
            if key == "verdict" and isinstance(value, Mapping):
                lines += [f"- verdict: **{value.get('verdict')}** after {value.get('pairs')} pairs "
                          f"(seed {value.get('seed')}): " + "; ".join(value.get("reasons", [])), ""]
                lines += verdict_lines(value) + [""]
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


def _lab_start(state: LabState) -> Mapping[str, Any]:
    starts = state.events("lab-start")
    return starts[0]["data"] if starts else {}


def directions(state: LabState) -> dict[str, str]:
    raw = state.meta("metric_directions")
    return json.loads(raw) if raw else {}


def _better(a: float, b: float, direction: str) -> bool:
    return a < b if direction == "lower" else a > b


def leaderboard(state: LabState) -> list[dict[str, Any]]:
    """Per metric: baseline, best value from a landed change, current main."""
    start = _lab_start(state)
    baseline: Mapping[str, float] = start.get("baseline", {})
    dirs = directions(state)
    board: dict[str, dict[str, Any]] = {
        key: {"metric": key, "baseline": value, "best": value, "by": "baseline", "main": value}
        for key, value in baseline.items()
    }
    for experiment in state.experiments():
        if experiment.decision != "LAND" or not experiment.judgment:
            continue
        for metric in (experiment.judgment.get("verdict") or {}).get("metrics", []):
            entry = board.get(metric["key"])
            value = metric.get("candidate_median")
            if entry is None or value is None:
                continue
            if metric.get("verdict") == "improved" and _better(value, entry["best"], dirs.get(metric["key"], "lower")):
                entry.update(best=value, by=experiment.name, commit=experiment.merge_commit or experiment.land_commit)
    for measurement in state.measurements("main"):
        for key, value in measurement["metrics"].items():
            if key in board and value is not None:
                board[key]["main"] = value
    return list(board.values())


def render_leaderboard(state: LabState) -> str:
    lines = ["# Leaderboard", "", "Best known value per metric and the change that achieved it.", "",
             "| metric | direction | baseline | best | change | vs baseline | main now |", "|---|---|---:|---:|---|---:|---:|"]
    dirs = directions(state)
    for row in leaderboard(state):
        change = row["by"] if row["by"] == "baseline" else f"`{row['by']}` ({(row.get('commit') or '')[:10]})"
        delta = (row["best"] / row["baseline"] - 1) if row["baseline"] else None
        lines.append(f"| {row['metric']} | {dirs.get(row['metric'], 'lower')} is better | {num(row['baseline'])} | "
                     f"{num(row['best'])} | {change} | {pct(delta)} | {num(row['main'])} |")
    return "\n".join(lines) + "\n"


def render_final_report(state: LabState, next_backlog: Sequence[Mapping[str, Any]]) -> str:
    stop = state.events("stop")
    reason = stop[-1]["data"].get("reason", "") if stop else "the lab has not stopped"
    experiments = state.experiments()
    landed = [e for e in experiments if e.decision == "LAND"]
    killed = [e for e in experiments if e.decision == "KILL"]
    iterated = [e for e in experiments if e.decision == "ITERATE"]
    lines = ["# Final report", "", f"Stopped: {reason}.", "",
             f"{len(experiments)} experiments: {len(landed)} landed, {len(killed)} killed, {len(iterated)} iterated.", "",
             "## Per metric: baseline to final", "",
             "| metric | baseline | final (main) | change |", "|---|---:|---:|---:|"]
    for row in leaderboard(state):
        delta = (row["main"] / row["baseline"] - 1) if row["baseline"] else None
        lines.append(f"| {row['metric']} | {num(row['baseline'])} | {num(row['main'])} | {pct(delta)} |")
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
        lines.append(f"- `{item['id']}` (score {item['score']:.2f}, {item['lane']}): {item['title']}")
    if not next_backlog:
        lines.append("- the backlog is empty: run `orchard plan` or `orchard backlog add`")
    cost = _total_cost(experiments)
    if cost:
        lines += ["", "## Agent cost", "", ", ".join(f"{k}: {num(v)}" for k, v in cost.items())]
    return "\n".join(lines) + "\n"


def _total_cost(experiments: Sequence[Any]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for e in experiments:
        usage = ((e.candidate or {}).get("usage") or {})
        for key, value in usage.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                totals[key] = totals.get(key, 0.0) + value
    return totals


def next_backlog(state: LabState, top: int = 6) -> list[dict[str, Any]]:
    return [{"id": r.id, "score": backlog.score(r.data), "lane": r.data.get("lane", "exploit"),
             "title": r.data.get("title", "")} for r in backlog.ranked(state)[:top]]


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
