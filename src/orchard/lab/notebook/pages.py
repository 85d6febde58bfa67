"""The lab's HTML: one set of sections for the live dashboard and the static report.html.

Each section is rendered here from the typed snapshot (`view.LabView`);
report.html is the sections in one self-contained file (plotly's JavaScript
inlined: it opens with no network), the dashboard is a page that fetches
the same sections and charts again while the lab runs. Every string that
came from a worker or a hypothesis is escaped.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from importlib.util import find_spec
from pathlib import Path
from urllib.parse import quote

from orchard.lab.judge.measuring import LockState
from orchard.lab.judge.verdict_view import effect_cells, pct, score_text, short_commit
from orchard.lab.notebook.agent_log import LogItemKind, read_log
from orchard.lab.notebook.chart_cache import ChartCache
from orchard.lab.notebook.charts import Chart, unjudged
from orchard.lab.notebook.html_parts import CHART_SCRIPT, PAGE_SCRIPT, STYLE, decision, table, tabs, verdict_html
from orchard.lab.notebook.journal import when
from orchard.lab.notebook.lineage import lineage_html
from orchard.lab.notebook.lineage_graph import lineage_svg
from orchard.lab.notebook.view import ExperimentView, LabView
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.text import html_text as escape
from orchard.units import quantity

AT_WORK = (ExperimentStatus.STARTING, ExperimentStatus.RUNNING)  # a worker holds a slot; after, the judge has it
LOG_TAIL_ITEMS = 4


@dataclass(frozen=True)
class Page:
    """Every section's HTML by element id, the charts, and a version that changes when any of them does."""

    sections: dict[str, str]
    charts: list[Chart]

    @property
    def version(self) -> str:
        digest = hashlib.sha256()
        for key in sorted(self.sections):
            digest.update(key.encode() + b"\0" + self.sections[key].encode() + b"\0")
        for chart in self.charts:
            digest.update(chart.figure.encode())
        return digest.hexdigest()[:16]

    def to_json(self) -> str:
        return json.dumps({"version": self.version, "sections": self.sections,
                           "figures": [{"id": c.id, "figure": json.loads(c.figure)} for c in self.charts]})


def _decision(e: ExperimentView) -> str:
    return decision(e.decision or e.status)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def _state(view: LabView) -> str:
    """What the lab is doing: stopped, at work (workers in a slot, experiments at the judge), or calibrating."""
    if view.stopped:
        return f"stopped: {escape(view.stopped)}"
    if not view.started_at:
        if not view.running:
            return "not started"
        return "calibrating: the base is measured against itself; workers start beside it, verdicts wait for it"
    working = sum(1 for w in view.workers if w.status in AT_WORK)
    judged = len(view.workers) - working
    return f"{working} of {view.worker_slots} workers busy" + (f" · {judged} at the judge" if judged else "")


def _steer(path: str, label: str) -> str:
    """A control of the live dashboard: its page's script POSTs to `path` (lab/loop/dashboard_controls.py)."""
    return f"<button type=button class=steer data-steer='{escape(path)}'>{escape(label)}</button>"


def _pause(view: LabView, live: bool) -> str:
    """Who paused the lab, while it is; on the dashboard, the button that pauses or resumes it, whether a lab
    runs or not (as `orchard pause`: the next `orchard run` honours it)."""
    said = "" if view.paused is None else \
        f"<b>paused by {escape(view.paused)}</b>: no new workers; the running ones finish and are judged "
    if not live:
        return f"<p>{said}</p>" if said else ""
    button = _steer("api/resume", "resume the lab") if view.paused is not None else \
        _steer("api/pause", "pause the lab (no new workers)")
    return f"<p class=controls>{said}{button}</p>"


def summary(view: LabView, live: bool = False) -> str:
    d = view.decisions
    started = when(view.started_at) if view.started_at else "-"
    return (f"<p>workspace <code>{escape(view.workspace)}</code> · started {started} · base "
            f"<code>{escape(short_commit(view.base))}</code> · executor {escape(view.executor)}</p>"
            f"<p><b>{_state(view)}</b> · {len(view.experiments)} experiments: {d.get('LAND', 0)} LAND, "
            f"{d.get('KILL', 0)} KILL, {d.get('ITERATE', 0)} ITERATE</p>" + _pause(view, live)
            + "".join(f"<p class=muted>{escape(a.text())}</p>" for a in view.judge_hosts))


def _tail(lines: tuple[str, ...]) -> str:
    """A log's last few agent events (or lines), one short line each."""
    items = read_log(lines)[-LOG_TAIL_ITEMS:]
    shown = [i.title if i.kind != LogItemKind.OUTPUT else i.body.splitlines()[-1] for i in items]
    shown = [f"{i.title}: {i.body.strip().splitlines()[0][:160]}" if i.kind == LogItemKind.MESSAGE and i.body.strip()
             else line for i, line in zip(items, shown, strict=True)]
    return "<pre>" + escape("\n".join(shown) or "(no output yet)") + "</pre>"


def workers(view: LabView) -> str:
    if not view.workers:
        return "<p class=muted>no worker is running</p>"
    rows = [[escape(w.experiment), escape(w.worker), escape(w.launcher), escape(w.status), _minutes(w.elapsed_s),
             escape(w.host), _tail(w.log_tail), _stop(w.experiment) if w.status in AT_WORK else ""]
            for w in view.workers]
    return table(("experiment", "worker", "launcher", "state", "elapsed", "host", "log tail", "steer"), rows, (4,))


def _stop(experiment: str) -> str:
    """Stop its worker: the hypothesis back to the backlog, or KILLed (as `orchard stop [--kill]`)."""
    path = "api/stop/" + quote(experiment, safe="")
    return _steer(path, "stop (back to the backlog)") + " " + _steer(path + "?kill=1", "stop and KILL")


def lock(view: LabView) -> str:
    lk = view.lock
    holder = f"pid {lk.holder_pid} ({escape(lk.holder_label or '?')})" if lk.holder_pid else "-"
    since = when(lk.holder_since) if lk.holder_since else "-"
    queue = ", ".join(f"pid {pid}" for pid in lk.queue) or "nobody"
    waits = view.lock_waits[-8:]
    recent = ", ".join(f"{escape(w.kind)} {escape(w.experiment or '')} {w.wait_ms / 1000:.2f} s" for w in waits)
    return (
        f"<p>measurement lock <b>{escape(lk.state)}</b>; "
        f"{'holder' if lk.state == LockState.HELD else 'last holder'}: {holder} since {since}; queue: {queue}</p>"
        f"<p class=muted>recent waits per verdict: {recent or 'none recorded'} · <code>{escape(lk.path)}</code></p>"
        + "".join(f"<p>judge {escape(q.line())}</p>" for q in view.judges)
    )


def backlog(view: LabView) -> str:
    if not view.backlog:
        return "<p class=muted>the backlog is empty</p>"
    rows = [
        [str(i + 1), escape(b.id), score_text(b.score), escape(b.lane + b.note), escape(b.title)]
        for i, b in enumerate(view.backlog)
    ]
    return table(("rank", "hypothesis", "score", "lane", "title"), rows, (0, 2))


def leaderboard(view: LabView) -> str:
    if not view.leaderboard:
        return "<p class=muted>nothing measured yet</p>"
    rows = []
    for r in view.leaderboard:
        change = "-" if r.effect is None else f"<code>{escape(r.by)}</code> ({escape(short_commit(r.commit))})"
        rows.append([escape(r.metric), f"{escape(r.direction)} is better", escape(quantity(r.baseline, r.metric)),
                     change, *map(escape, effect_cells(r.effect, r.final))])
    # every number a paired effect with its interval: no median of one campaign divided by another's
    return table(("metric", "direction", "baseline (start)", "best change", "its effect [interval]",
                   "main vs start [interval]", "floor"), rows, (2, 4, 5, 6))


def _chart_divs(charts: Sequence[Chart]) -> str:
    return (
        "".join(
            f"<div class=chart id='{escape(c.id)}' role='img' aria-label='{escape(c.title)}'></div>" for c in charts
        )
        or "<p class=muted>no measurements yet</p>"
    )


def unjudged_list(view: LabView) -> str:
    missing = unjudged(view)
    if not missing:
        return ""
    items = "".join(
        f"<li><code>{escape(e.name)}</code> ({_decision(e)}): {escape('; '.join(e.reasons) or 'not judged yet')}</li>"
        for e in missing
    )
    return f"<p>Experiments without a verdict, not in the charts:</p><ul class=unjudged>{items}</ul>"


def experiment_href(name: str, live: bool) -> str:
    """Where an experiment's name links: its own page on the dashboard, its entry in report.html (one file)."""
    return f"experiment/{name}" if live else f"#exp-{name}"


def _effect(e: ExperimentView, key: str) -> str:
    found = [m for m in (e.verdict.metrics if e.verdict else ()) if m.key == key]
    return escape(pct(found[0].effect)) if found else "-"


def experiment_list(view: LabView, *, live: bool) -> str:
    """One sortable row per experiment (its effect on every metric), each name a link to all it has."""
    if not view.experiments:
        return "<p class=muted>no experiment yet</p>"
    keys = view.metrics()
    rows = [[f"<a href='{escape(experiment_href(e.name, live))}'><code>{escape(e.name)}</code></a>", _decision(e),
             escape(e.rule or "-"), escape(e.worker), escape(e.lane), escape(e.launcher or "-"),
             when(e.started_at), "-" if e.finished_at is None else _minutes(e.finished_at - e.started_at),
             *(_effect(e, key) for key in keys), escape(e.title)] for e in view.experiments]
    head = ("experiment", "decision", "rule", "worker", "lane", "launcher", "started (UTC)", "worker time",
            *(f"effect: {key}" for key in keys), "hypothesis")
    listing = table(head, rows, tuple(range(7, 8 + len(keys))))
    if live:
        return listing
    return listing + "\n".join(_entry(e) for e in view.experiments)


def _entry(e: ExperimentView) -> str:
    """An experiment's reasons and verdict, for report.html (the dashboard gives each its own page)."""
    reasons = "".join(f"<li>{escape(r)}</li>" for r in e.reasons)
    return (f"<details id='exp-{escape(e.name)}' data-experiment='{escape(e.name)}'><summary><code>{escape(e.name)}"
            f"</code> · {_decision(e)} · worker {escape(e.worker)} ({escape(e.lane)}) · {escape(e.title)}</summary>"
            + (f"<ul>{reasons}</ul>" if reasons else "") + (verdict_html(e.verdict) if e.verdict else "")
            + "</details>")


def final(view: LabView) -> str:
    """Main at the end against main at the start, the one paired verdict FINAL_REPORT.md prints."""
    done = view.final
    if done is None:
        return "<p class=muted>not measured yet: the lab measures it when it stops</p>"
    if not done.moved or done.verdict is None:
        return f"<p>main did not move from <code>{escape(short_commit(done.start))}</code>: nothing to compare</p>"
    return (f"<p>main <code>{escape(short_commit(done.end))}</code> against main at the start "
            f"<code>{escape(short_commit(done.start))}</code>, paired:</p>" + verdict_html(done.verdict))


def journal(view: LabView, newest_first: bool) -> str:
    entries = list(reversed(view.journal)) if newest_first else list(view.journal)
    return (
        "<div class=feed>"
        + "".join(f"<article data-kind='{escape(e.kind)}'><pre>{escape(e.text)}</pre></article>" for e in entries)
        + "</div>"
    )


def build_page(view: LabView, *, live: bool, cache: ChartCache | None = None) -> Page:
    """Every section of the page for this snapshot; `live` adds the workers, the lock and the newest-first feed."""
    charts = (cache or ChartCache()).charts(view)
    sections = {"summary": summary(view, live)}
    if live:
        sections |= {"workers": workers(view), "lock": lock(view)}
    sections |= {
        "leaderboard": leaderboard(view),
        "final": final(view),
        "chart-main": _chart_divs(charts.main),
        "chart-experiments": _chart_divs(charts.experiments) + unjudged_list(view),
        "chart-activity": _chart_divs(charts.activity),
        "experiments": experiment_list(view, live=live),
        "lineage": "" if view.lineage is None else (lineage_svg(view.lineage, lambda n: experiment_href(n, live))
                                                    + lineage_html(view.lineage, lambda n: experiment_href(n, live))),
        "backlog": backlog(view),
        "journal": journal(view, newest_first=live),
    }
    return Page(sections, charts.all())


TITLES = {
    "summary": "",
    "workers": "Workers",
    "lock": "Measurement lock",
    "leaderboard": "Leaderboard",
    "final": "Main at the end against main at the start",
    "chart-main": "Main over time",
    "chart-experiments": "Experiments: effect against their own base",
    "chart-activity": "Lock waits and busy workers",
    "experiments": "Every experiment",
    "lineage": "Lineage",
    "backlog": "Backlog (ranked)",
    "journal": "Journal",
}
# the tabs and the sections in each; the summary stays above them
TABS = (("overview", "Overview", ("workers", "lock", "leaderboard", "final")),
        ("charts", "Charts", ("chart-main", "chart-experiments", "chart-activity")),
        ("experiments", "Experiments", ("experiments",)), ("lineage", "Lineage", ("lineage",)),
        ("backlog", "Backlog", ("backlog",)), ("journal", "Journal", ("journal",)))


def body(sections: dict[str, str]) -> str:
    """The summary, then the tabs, each section under its title (a section the page lacks is left out)."""
    def section(key: str) -> str:
        return (f"<h2>{TITLES[key]}</h2>" if TITLES[key] else "") + f"<section id='{key}'>{sections[key]}</section>"
    return section("summary") + tabs([(name, label, "\n".join(section(k) for k in keys if k in sections))
                                      for name, label, keys in TABS])


@cache
def plotly_js() -> str:
    """plotly.min.js as the installed plotly package ships it (found, not imported: its Python is not needed)."""
    spec = find_spec("plotly")
    assert spec is not None and spec.origin is not None, "plotly is a dependency of orchard"
    return (Path(spec.origin).parent / "package_data" / "plotly.min.js").read_text(encoding="utf-8")


def _script_json(text: str) -> str:
    return text.replace("</", "<\\/")


def report_html(view: LabView) -> str:
    """report.html: one file, no network needed (plotly inlined), the same sections as the dashboard."""
    page = build_page(view, live=False)
    figures = _script_json(json.dumps([{"id": c.id, "figure": json.loads(c.figure)} for c in page.charts]))
    return (
        "<!doctype html><html lang=en><head><meta charset='utf-8'><title>orchard lab report</title>"
        "<link rel=icon href='data:,'>"
        f"<style>{STYLE}</style><script>{plotly_js()}</script></head><body>"
        f"<h1>orchard lab report</h1><p class=muted>rendered {when(view.generated_at)} from lab.db</p>"
        f"{body(page.sections)}<script>{CHART_SCRIPT}{PAGE_SCRIPT}\norchardDraw({figures});</script></body></html>\n"
    )


def dashboard_html() -> str:
    """The live dashboard's page: it fetches the sections and charts from /api/page while the lab runs."""
    return (
        resources.files("orchard.lab")
        .joinpath("templates/dashboard.html")
        .read_text(encoding="utf-8")
        .replace("/*STYLE*/", STYLE)
        .replace("/*CHARTS*/", CHART_SCRIPT + PAGE_SCRIPT)
        .replace("<!--SECTIONS-->", body(dict.fromkeys(TITLES, "")))
    )
