"""One experiment's own page on the dashboard: its verdict and reasons, its diff, its worker's log, its lineage.

Read from lab.db (read-only) and the experiment's log when the page is asked
for, not with every snapshot: a patch and an agent's log are the largest
things the lab keeps, and only the page that shows them reads them. The
verdict is the one the journal printed under the judgment; the diff is the
patch the judge measured (the candidate's), coloured by `diff_view`; the log
is rendered by `agent_log` as the agent's messages and tool calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchard.lab.db.state import LabState
from orchard.lab.judge.verdict_view import VerdictView, short_commit
from orchard.lab.notebook.agent_log import log_html, read_log
from orchard.lab.notebook.diff_view import diff_style, patch_html
from orchard.lab.notebook.html_parts import PAGE_SCRIPT, STYLE, decision, tabs, verdict_html
from orchard.lab.notebook.journal import when
from orchard.lab.notebook.spending import cost_text
from orchard.lab.records.db import ExperimentRecord, HypothesisRecord
from orchard.lab.records.judgment import JudgmentEntry
from orchard.lab.text import html_text as escape
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.units import count, duration_ms

LOG_LIMIT = 4_000_000  # bytes of a log read for its page; a longer log shows its end, and says so


@dataclass(frozen=True)
class ExperimentPage:
    """All one experiment's page shows, read in one go."""

    record: ExperimentRecord
    hypothesis: HypothesisRecord | None
    children: tuple[str, ...]  # the hypotheses an ITERATE of this one made
    verdict: VerdictView | None
    log: str
    log_cut: int  # bytes of the log's beginning left out


def _log(path: Path) -> tuple[str, int]:
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - LOG_LIMIT))
            raw = handle.read()
    except OSError:
        return "", 0
    cut = max(0, size - LOG_LIMIT)
    if cut:
        raw = raw.partition(b"\n")[2]
    return raw.decode("utf-8", errors="replace"), cut


def read_page(ws: Workspace, state: LabState, name: str) -> ExperimentPage | None:
    """The experiment's page, or None when the lab has no experiment of that name."""
    with state.reading():
        try:
            record = state.experiment(name)
        except KeyError:
            return None
        hypotheses = {h.id: h for h in state.hypotheses()}
        judged = [e for e in state.events_of(JudgmentEntry) if e.experiment == name]
    children = tuple(h.id for h in hypotheses.values() if h.parent == record.hypothesis)
    verdict = VerdictView.from_verdict(judged[-1].event.verdict) if judged else None
    log, cut = _log(ws.log_path(name))
    return ExperimentPage(record, hypotheses.get(record.hypothesis), children, verdict, log, cut)


def _facts(page: ExperimentPage) -> str:
    r = page.record
    h = page.hypothesis
    took = "-" if r.finished_at is None else duration_ms((r.finished_at - r.started_at) * 1000)
    usage = r.candidate.usage if r.candidate else None
    spent = "-" if usage is None else cost_text(usage.cost_usd, usage.estimated)
    tokens = "-" if usage is None else f"{count(usage.input_tokens)} in, {count(usage.output_tokens)} out"
    parent = (f"ITERATE child of <code>{escape(h.parent)}</code>" if h and h.parent else "an original hypothesis")
    children = ", ".join(f"<code>{escape(c)}</code>" for c in page.children) or "none"
    rule = r.judgment.rule if r.judgment else None
    rows = [
        ("decision", decision(str(r.decision or r.status)) + (f" by rule <code>{escape(rule)}</code>" if rule else "")),
        ("hypothesis", f"<code>{escape(r.hypothesis)}</code> {escape(h.hypothesis.title if h else '')}"),
        ("lineage", f"{parent}; ITERATE children: {children}"),
        ("started from", f"<code>{escape(short_commit(r.target_base))}</code> (main when it started)"),
        ("merged as", f"<code>{escape(short_commit(r.merge_commit))}</code>" if r.merge_commit else "-"),
        ("worker", f"{escape(r.worker)} ({escape(r.lane)}) · {escape(r.candidate.launcher if r.candidate else '')}"),
        ("started", when(r.started_at)), ("worker time", took), ("agent cost", spent), ("agent tokens", tokens),
    ]
    return "<table>" + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows) + "</table>"


def _verdict(page: ExperimentPage) -> str:
    reasons = "".join(f"<li>{escape(r)}</li>" for r in page.record.reasons)
    parts = [f"<h3>Reasons</h3><ul class=reasons>{reasons}</ul>" if reasons else "<p class=muted>no reasons yet</p>"]
    parts.append(verdict_html(page.verdict) if page.verdict else "<p class=muted>no verdict: it was not measured</p>")
    findings = page.record.judgment.findings if page.record.judgment else ()
    if findings:
        held = " (held for a person: <code>orchard review --land</code> or <code>--kill</code>)" if (
            page.record.judgment and page.record.judgment.held) else ""
        items = "".join(f"<li><code>{escape(f.flag)}</code> at <code>{escape(f.file)}:{f.line}</code>: "
                        f"<code>{escape(f.snippet)}</code>{'' if f.definite else ' (doubtful)'}</li>" for f in findings)
        parts.append(f"<h3>Hack review{held}</h3><ul class=findings>{items}</ul>")
    return "".join(parts)


def _diff(page: ExperimentPage) -> str:
    candidate = page.record.candidate
    if candidate is None:
        return "<p class=muted>the worker has not finished: no patch yet</p>"
    files = ", ".join(f"<code>{escape(f)}</code>" for f in candidate.changed_files) or "none"
    return f"<p>changed files: {files}</p>" + patch_html(candidate.patch)


def _log_part(page: ExperimentPage, log_name: str) -> str:
    cut = f"<p class=muted>the log's first {count(page.log_cut)} bytes are left out</p>" if page.log_cut else ""
    return f"<p class=muted><code>{escape(log_name)}</code></p>{cut}" + log_html(read_log(page.log.splitlines()))


def page_html(ws: Workspace, page: ExperimentPage) -> str:
    name = page.record.name
    panels = [("verdict", "Verdict and reasons", _verdict(page)), ("diff", "Diff", _diff(page)),
              ("log", "Agent log", _log_part(page, str(ws.log_path(name))))]
    return (
        f"<!doctype html><html lang=en><head><meta charset='utf-8'><title>{escape(name)} · orchard</title>"
        f"<link rel=icon href='data:,'><style>{STYLE}{diff_style()}</style></head><body>"
        f"<p><a href='../'>← the lab</a></p><h1>Experiment <code>{escape(name)}</code></h1>"
        f"<section id=facts>{_facts(page)}</section>{tabs(panels)}<script>{PAGE_SCRIPT}</script></body></html>\n"
    )
