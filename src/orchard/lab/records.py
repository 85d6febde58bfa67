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
from orchard.lab.land import Publication
from orchard.lab.state import LabState
from orchard.lab.verdict_table import (
    COLUMNS,
    MetricEffect,
    after_pairs,
    cells,
    effect_cells,
    num,
)


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
        lines.append(f"Worker `{data['worker']}` ({data['lane']} lane, launcher `{data.get('launcher', '?')}`) "
                     f"takes hypothesis `{data['hypothesis']}` at base `{data['base'][:12]}`: {data.get('title', '')}")
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
            lines += ["", f"Verdict **{verdict['verdict']}** {after_pairs(verdict.get('pairs'))} "
                          f"(seed {verdict.get('seed')}):", ""]
            lines += verdict_lines(verdict)
        usage = data.get("usage") or {}
        if any(v is not None for v in usage.values()):
            lines += ["", "Agent cost: " + ", ".join(f"{k} {num(v)}" for k, v in usage.items() if v is not None)]
    else:
        for key, value in data.items():
            if key == "verdict" and isinstance(value, Mapping):
                lines += [f"- verdict: **{value.get('verdict')}** {after_pairs(value.get('pairs'))} "
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
                entry.update(best=value, by=experiment.name, commit=experiment.merge_commit or experiment.land_commit,
                             effect=MetricEffect.from_verdict_metric(metric))
    for measurement in state.measurements("main"):
        for key, value in measurement["metrics"].items():
            if key in board and value is not None:
                board[key]["main"] = value
    done = state.events("final-verdict")
    for metric in (done[-1]["data"].get("verdict") or {}).get("metrics", []) if done else []:
        if metric["key"] in board:
            board[metric["key"]]["final"] = MetricEffect.from_verdict_metric(metric)
    return list(board.values())


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
        best: MetricEffect | None = row.get("effect")
        change = "-" if best is None else f"`{row['by']}` ({(row.get('commit') or '')[:10]})"
        lines.append("| " + " | ".join([row["metric"], f"{dirs.get(row['metric'], 'lower')} is better",
                                         num(row["baseline"]), change,
                                         *effect_cells(best, row.get("final"))]) + " |")
    return "\n".join(lines) + "\n"


def final_lines(state: LabState) -> list[str]:
    """Main at the end against main at the start, as one paired verdict (never a ratio of unpaired medians)."""
    done = state.events("final-verdict")
    lines = ["## Main at the end against main at the start", ""]
    if not done:
        return lines + ["Not measured yet: the lab measures it when it stops."]
    data = done[-1]["data"]
    if not data.get("moved"):
        return lines + [f"Main did not move from `{data['start'][:10]}`: nothing to compare."]
    verdict = data["verdict"]
    summary = (f"One paired verdict of main `{data['end'][:10]}` against main at the start "
               f"`{data['start'][:10]}` (same suite, same lock, interleaved pairs): **{verdict['verdict']}** "
               f"{after_pairs(verdict.get('pairs'))} (seed {verdict.get('seed')}).")
    return [*lines, summary, "", *verdict_lines(verdict)]


def render_final_report(state: LabState, next_backlog: Sequence[Mapping[str, Any]]) -> str:
    stop = state.events("stop")
    reason = stop[-1]["data"].get("reason", "") if stop else "the lab has not stopped"
    experiments = state.experiments()
    landed = [e for e in experiments if e.decision == "LAND"]
    killed = [e for e in experiments if e.decision == "KILL"]
    iterated = [e for e in experiments if e.decision == "ITERATE"]
    lines = ["# Final report", "", f"Stopped: {reason}.", "",
             f"{len(experiments)} experiments: {len(landed)} landed, {len(killed)} killed, {len(iterated)} iterated.", "",
             *final_lines(state)]
    lines += ["", "## Landed changes", ""]
    published = {event["experiment"]: event["data"] for event in state.events("publish")}
    for e in landed:
        lines.append(f"- `{e.name}` on `{e.branch}`{_via(e)} ({_landing_state(e, published.get(e.name))}): "
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
    failures = state.events("launcher-failure")
    if failures:
        lines += ["", "## Launcher failures (the hypotheses went back to the backlog)", ""]
        lines += [f"- `{e['experiment']}` (hypothesis `{e['data']['hypothesis']}`): {e['data']['reason']}"
                  for e in failures]
    lines += ["", "## Killed hypotheses", ""]
    for e in killed:
        named = "" if e.name == e.hypothesis else f" (hypothesis `{e.hypothesis}`)"
        lines.append(f"- `{e.name}`{named}{_via(e)}: " + "; ".join(e.reasons))
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


def _via(experiment: Any) -> str:
    """Which launcher ran the experiment (hypotheses may name their own)."""
    launcher = (experiment.candidate or {}).get("launcher")
    return f" via `{launcher}`" if launcher else ""


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
