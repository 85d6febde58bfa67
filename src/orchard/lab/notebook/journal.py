"""JOURNAL.md: every event in lab.db as a dated entry, oldest first.

The journal is the lab's account of itself: every other page (LEADERBOARD.md,
FINAL_REPORT.md, report.html, the dashboard) prints numbers that appear
here, through the same formatters (`judge/verdict_view`), so they agree with it
to the digit. The dashboard's feed shows these entries as they are.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from orchard.lab.db.state import LabState
from orchard.lab.judge.verdict_view import VerdictView, floor_pct, markdown_head, markdown_table, num, short_commit
from orchard.lab.records.db import JournalEvent, Unrecognized
from orchard.lab.records.events import Event, ExperimentHost, ExperimentStarted
from orchard.lab.records.hack_findings import WinHeld, WinSettled
from orchard.lab.records.judge_host import JudgeLost, JudgeStarted
from orchard.lab.records.judgment import JudgmentEntry
from orchard.lab.records.lab_start import LabStart
from orchard.lab.records.revisit_events import Revisited
from orchard.lab.records.steering_events import ExperimentStopped, Paused, Resumed, StopAsked
from orchard.lab.text import inline
from orchard.lab.workers.sandbox.sandbox import UNSANDBOXED_NOTE, SandboxMode
from orchard.units import quantity


def when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _verdict(data: object) -> VerdictView | None:
    """The verdict an event's value carries: a verdict document, or a judgment holding one (a rebase's)."""
    if not isinstance(data, Mapping):
        return None
    inner = data.get("verdict") if "decision" in data else data
    return VerdictView.from_document(inner) if isinstance(inner, Mapping) and "verdict" in inner else None


def journal_entry(event: JournalEvent[Event | Unrecognized]) -> list[str]:
    """One event as its dated JOURNAL.md entry."""
    head = f"## {when(event.at)} · {event.kind}" + (f" · {event.experiment}" if event.experiment else "")
    record = event.event
    if isinstance(record, LabStart):
        body = _lab_start(record)
    elif isinstance(record, ExperimentStarted):
        body = _experiment_start(record)
    elif isinstance(record, ExperimentHost):
        body = [f"Runs on host `{record.host}` (dask worker `{record.address}`)"
                + (f"; re-queued: its dask worker `{record.requeued_from}` was lost." if record.requeued_from
                   else ".")]
    elif isinstance(record, JudgeStarted):
        lost = record.lost_on
        body = [f"Its {record.step} runs on judge host `{record.judge.host}` (dask worker `{record.judge.address}`)"
                + (f"; again, from scratch: judge host `{lost.host}` (dask worker `{lost.address}`) was lost "
                   "running it." if lost else ".")]
    elif isinstance(record, JudgeLost):
        body = [f"Its judge host `{record.judge.host}` (dask worker `{record.judge.address}`) left the cluster "
                f"before its {record.step}: judged again from scratch on another judge host."]
    elif isinstance(record, JudgmentEntry):
        body = _judgment(record)
    elif isinstance(record, WinHeld):
        body = ["Held for a person, not landed: the hack review doubted it (`orchard review --land` or `--kill` "
                "settles it).", "", *(f"- {inline(finding)}" for finding in record.findings)]
    elif isinstance(record, WinSettled):
        body = [f"Settled in review by {inline(record.by)}: **{record.settlement}**."]
    elif isinstance(record, (StopAsked, ExperimentStopped, Paused, Resumed, Revisited)):
        body = [inline(record.describe())]
    else:
        body = _fields(record.to_dict())
    return [head, "", *body, ""]


def _lab_start(start: LabStart) -> list[str]:
    lines = [f"Target base `{short_commit(start.base)}`; bench `{short_commit(start.bench_base)}`.",
             f"Calibration: {start.calibration}", "", "| metric | baseline median | noise floor |", "|---|---:|---:|"]
    return lines + [f"| {key} | {quantity(value, key)} | {floor_pct(start.floors.get(key))} |"
                    for key, value in sorted(start.baseline.items())]


def _experiment_start(started: ExperimentStarted) -> list[str]:
    lines = [f"Worker `{started.worker}` ({started.lane} lane, launcher `{started.launcher}`) "
             f"takes hypothesis `{started.hypothesis}` at base `{short_commit(started.base)}`: {inline(started.title)}"]
    if started.executor == "dask":
        return [*lines, f"Submitted to the dask cluster `{started.scheduler or ''}`; log: `{started.log}`."]
    return [*lines, f"Prompt: `{started.prompt or ''}`; log: `{started.log}`."]


def _judgment(entry: JudgmentEntry) -> list[str]:
    lines = [f"**{entry.decision}** · hypothesis `{entry.hypothesis}`: {inline(entry.title)}", ""]
    if entry.sandbox == SandboxMode.NONE:
        lines += [f"**{UNSANDBOXED_NOTE}.**", ""]
    lines += [f"Hypothesis: {inline(entry.metric)} · predicted {entry.predicted} · cause: {inline(entry.cause)}", ""]
    lines += [f"- {inline(reason)}" for reason in entry.reasons]
    verdict = VerdictView.from_verdict(entry.verdict)
    if verdict is not None:
        lines += ["", f"Verdict {markdown_head(verdict)}:", ""]
        lines += markdown_table(verdict)
    usage = {} if entry.usage is None else dict(sorted(entry.usage.to_dict().items()))
    mark = " (estimated)" if usage.pop("estimated", False) else ""  # as journals read before estimates, marked
    if any(v is not None for v in usage.values()):
        lines += ["", "Agent cost: " + ", ".join(f"{k} {num(v)}{mark if k == 'cost_usd' else ''}"
                                                 for k, v in usage.items() if v is not None)]
    return lines


def _fields(data: dict[str, Any]) -> list[str]:
    """Any other event, one line per field as its JSON holds it (a verdict, or a judgment's, as its table)."""
    lines = []
    for key, value in sorted(json.loads(json.dumps(data, default=str)).items()):
        verdict = _verdict(value) if key in ("verdict", "judgment") else None
        if verdict is not None:
            lines += [f"- {key}: {markdown_head(verdict)}: " + inline("; ".join(verdict.reasons)), ""]
            lines += markdown_table(verdict) + [""]
        elif isinstance(value, (dict, list)):
            lines.append(f"- {inline(key)}: {inline(json.dumps(value, default=str))}")
        else:
            lines.append(f"- {inline(key)}: {inline(value)}")
    return lines


HEAD = ["# Lab journal", "", "Every judgment, landing and stop, oldest first. Rendered from lab.db.", ""]
RECORD = "<!-- orchard event "  # each entry's stored row, hidden where the Markdown is rendered


def record_line(event: JournalEvent[Event | Unrecognized]) -> str:
    """The event's row as lab.db stores it, in an HTML comment: what `orchard recover` replays.

    ASCII JSON: controls, bidi overrides and bytes that were not UTF-8 are `\\u` escapes, and
    `<`, `>` and `&` are too, so no text of the event can close the comment or start markup.
    """
    row = {"id": event.id, "at": event.at, "kind": event.kind, "experiment": event.experiment,
           "data": json.dumps(event.event.to_dict(), sort_keys=True, default=str)}
    text = json.dumps(row, sort_keys=True)
    return RECORD + text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026") + " -->"


def recorded_rows(text: str) -> list[dict[str, Any]]:
    """The rows a JOURNAL.md holds in its record lines, oldest first (entries without one are not among them)."""
    rows = []
    for line in text.splitlines():
        if line.startswith(RECORD) and line.endswith(" -->"):
            with contextlib.suppress(ValueError):
                rows.append(json.loads(line[len(RECORD):-len(" -->")]))
    return [r for r in rows if isinstance(r, dict) and {"id", "at", "kind", "experiment", "data"} <= r.keys()]


def render_journal(state: LabState, *, records: bool = True) -> str:
    return render_events(state.events(), records=records)


def render_events(events: Sequence[JournalEvent[Event | Unrecognized]], *, records: bool = True) -> str:
    """The whole JOURNAL.md of these events (without `records`, as a person reads it rendered)."""
    return "\n".join(HEAD) + appended(events, records=records)


def appended(events: Sequence[JournalEvent[Event | Unrecognized]], *, records: bool = True) -> str:
    """What these events add at the end of a JOURNAL.md (a whole journal is its head and this)."""
    return "".join("\n" + "\n".join([*journal_entry(event), *([record_line(event), ""] if records else [])])
                   for event in events)
