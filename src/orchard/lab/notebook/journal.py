"""JOURNAL.md: every event in lab.db as a dated entry, oldest first.

The journal is the lab's account of itself: every other page (LEADERBOARD.md,
FINAL_REPORT.md, report.html, the dashboard) prints numbers that appear
here, through the same formatters (`judge/verdict_view`), so they agree with it
to the digit. The dashboard's feed shows these entries as they are.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime

from orchard.lab.db.state import LabState
from orchard.lab.judge.verdict_view import VerdictView, floor_pct, markdown_head, markdown_table, num, short_commit
from orchard.lab.records.db import JournalEvent
from orchard.lab.records.judgment import JudgmentEntry
from orchard.lab.records.lab_start import LAB_START, LabStart
from orchard.lab.text import inline
from orchard.lab.workers.sandbox import UNSANDBOXED_NOTE, SandboxMode


def when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _verdict(data: object) -> VerdictView | None:
    """The verdict an event's value carries: a verdict document, or a judgment holding one (a rebase's)."""
    if not isinstance(data, Mapping):
        return None
    inner = data.get("verdict") if "decision" in data else data
    return VerdictView.from_document(inner) if isinstance(inner, Mapping) and "verdict" in inner else None


def journal_entry(event: JournalEvent) -> list[str]:
    data = event.data
    kind = event.kind
    head = f"## {when(event.at)} · {kind}" + (f" · {event.experiment}" if event.experiment else "")
    lines = [head, ""]
    if kind == LAB_START:
        start = LabStart.from_dict(data)
        lines.append(f"Target base `{short_commit(start.base)}`; bench `{short_commit(start.bench_base)}`.")
        lines.append(f"Calibration: {start.calibration}")
        lines.append("")
        lines += ["| metric | baseline median | noise floor |", "|---|---:|---:|"]
        for key, value in sorted(start.baseline.items()):
            lines.append(f"| {key} | {num(value)} | {floor_pct(start.floors.get(key))} |")
    elif kind == "experiment-start":
        lines.append(f"Worker `{data['worker']}` ({data['lane']} lane, launcher `{data.get('launcher', '?')}`) "
                     f"takes hypothesis `{data['hypothesis']}` at base `{short_commit(data['base'])}`: "
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
        verdict = VerdictView.from_verdict(entry.verdict)
        if verdict is not None:
            lines += ["", f"Verdict {markdown_head(verdict)}:", ""]
            lines += markdown_table(verdict)
        usage = entry.usage or {}
        if any(v is not None for v in usage.values()):
            lines += ["", "Agent cost: " + ", ".join(f"{k} {num(v)}" for k, v in usage.items() if v is not None)]
    else:
        for key, value in data.items():
            verdict = _verdict(value) if key in ("verdict", "judgment") else None
            if verdict is not None:
                lines += [f"- {key}: {markdown_head(verdict)}: " + inline("; ".join(verdict.reasons)), ""]
                lines += markdown_table(verdict) + [""]
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
