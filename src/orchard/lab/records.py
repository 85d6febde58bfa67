"""The lab notebook: JOURNAL.md, LEADERBOARD.md, FINAL_REPORT.md, report.html.

All four are rendered from lab.db, whole, every time, and replaced
atomically: a colleague reading them the next morning sees exactly what the
database says, and a crash mid-write leaves the previous version intact.
"""

from __future__ import annotations

import html
import json
import math
import os
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from orchard.lab import backlog
from orchard.lab.land import Publication
from orchard.lab.state import LabState


def when(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def pct(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:+.2%}"


def num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def verdict_lines(verdict: Mapping[str, Any] | None) -> list[str]:
    """A verdict as a Markdown table: one line per metric, then its gates."""
    if not verdict:
        return []
    lines = [
        "| metric | verdict | effect | interval | floor | n | MDE | baseline | candidate |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for m in verdict.get("metrics", []):
        low, high = (m.get("interval") or [None, None])
        lines.append(
            f"| {m['key']} | {m['verdict']} | {pct(m.get('effect'))} | [{pct(low)}, {pct(high)}] | "
            f"{m['floor']:.2%} | {m['n']} | {pct(m.get('mde')).lstrip('+')} | {num(m.get('baseline_median'))} | "
            f"{num(m.get('candidate_median'))} |"
        )
    for gate in verdict.get("gates", []):
        lines.append(f"\ngate `{gate['name']}`: {'pass' if gate['passed'] else 'FAIL'} ({gate['detail']})")
    return lines


def _journal_entry(event: Mapping[str, Any]) -> list[str]:
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
        lines += _journal_entry(event)
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
    published = {event["experiment"]: event["data"] for event in state.events("publish")}
    for e in landed:
        lines.append(f"- `{e.name}` on `{e.branch}` ({_landing_state(e, published.get(e.name))}): "
                     + "; ".join(e.reasons))
    if not landed:
        lines.append("- none")
    where = json.loads(state.meta("publication") or "{}")
    if where:
        lines += ["", "## In your repository", "",
                  f"Wins are published to `{where['repo']}` as `lab/<experiment>` branches and `{where['ref']}`"
                  + ("." if where["ref"] == where["main"] else
                     f" (your `{where['main']}` is checked out there and never pushed to). To see and take them:"),
                  "", "```", *Publication(**where).commands(), "```"]
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


def _landing_state(experiment: Any, publish: Mapping[str, Any] | None) -> str:
    """Merged only when the merge is reachable in the target repository; otherwise say what it is."""
    if not experiment.merge_commit:
        return "branch kept, not merged"
    if publish is None or not publish.get("reachable"):
        why = (publish or {}).get("error", "not published yet")
        return f"merged in the lab's clone as `{experiment.merge_commit[:10]}`, NOT reachable in the target: {why}"
    return f"merged as `{experiment.merge_commit[:10]}`, on `{publish['branch']}` in the target"


def _total_cost(experiments: Sequence[Any]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for e in experiments:
        usage = ((e.candidate or {}).get("usage") or {})
        for key, value in usage.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                totals[key] = totals.get(key, 0.0) + value
    return totals


def _svg_plot(metric: str, points: Sequence[tuple[str, float, str]], baseline: float | None) -> str:
    """A small line plot of one metric over the experiments; landed ones in green, killed in red."""
    width, height, pad = 640, 220, 40
    values = [v for _, v, _ in points] + ([baseline] if baseline is not None else [])
    if not values:
        return ""
    low, high = min(values), max(values)
    span = (high - low) or abs(high) or 1.0
    low, high = low - span * 0.1, high + span * 0.1

    def x(i: int) -> float:
        return pad + (width - 2 * pad) * (i / max(1, len(points) - 1))

    def y(v: float) -> float:
        return height - pad - (height - 2 * pad) * (v - low) / (high - low)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="{html.escape(metric)}">',
             f'<rect width="{width}" height="{height}" fill="white" stroke="#ccc"/>',
             f'<text x="{pad}" y="20" font-size="13">{html.escape(metric)}</text>']
    if baseline is not None:
        parts.append(f'<line x1="{pad}" x2="{width - pad}" y1="{y(baseline):.1f}" y2="{y(baseline):.1f}" '
                     f'stroke="#888" stroke-dasharray="4 3"/><text x="{width - pad + 2}" y="{y(baseline):.1f}" '
                     f'font-size="10">baseline</text>')
    if len(points) > 1:
        path = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, (_, v, _) in enumerate(points))
        parts.append(f'<polyline points="{path}" fill="none" stroke="#36c"/>')
    colours = {"LAND": "#2a2", "KILL": "#c22", "ITERATE": "#e90"}
    for i, (name, value, decision) in enumerate(points):
        parts.append(f'<circle cx="{x(i):.1f}" cy="{y(value):.1f}" r="4" fill="{colours.get(decision, "#36c")}">'
                     f'<title>{html.escape(name)}: {value:.4g} ({decision})</title></circle>')
    parts.append(f'<text x="{pad}" y="{height - 10}" font-size="10">{low:.4g} .. {high:.4g}; '
                 f'green LAND, red KILL, orange ITERATE</text></svg>')
    return "".join(parts)


def render_html(state: LabState) -> str:
    """report.html: one plot per metric over the judged experiments, then the final report's tables."""
    start = _lab_start(state)
    series: dict[str, list[tuple[str, float, str]]] = {}
    for e in state.experiments():
        for metric in ((e.judgment or {}).get("verdict") or {}).get("metrics", []):
            if metric.get("candidate_median") is not None:
                series.setdefault(metric["key"], []).append((e.name, metric["candidate_median"], e.decision or ""))
    body = ["<!doctype html><meta charset='utf-8'><title>orchard lab report</title>",
            "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}svg{display:block;margin:1em 0}</style>",
            "<h1>orchard lab report</h1>"]
    for key in sorted(set(series) | set(start.get("baseline", {}))):
        body.append(_svg_plot(key, series.get(key, []), start.get("baseline", {}).get(key)))
    body.append("<h2>Experiments</h2><table border='1' cellpadding='4'><tr><th>experiment</th><th>hypothesis</th>"
                "<th>decision</th><th>reasons</th></tr>")
    for e in state.experiments():
        body.append(f"<tr><td>{html.escape(e.name)}</td><td>{html.escape(e.hypothesis)}</td>"
                    f"<td>{html.escape(e.decision or e.status)}</td><td>{html.escape('; '.join(e.reasons))}</td></tr>")
    body.append("</table>")
    return "\n".join(body) + "\n"


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
        write_atomic(root / "report.html", render_html(state))
