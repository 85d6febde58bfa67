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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from html import escape
from importlib import resources
from importlib.util import find_spec
from pathlib import Path

from orchard.lab.judge.verdict_view import (
    COLUMNS,
    VerdictView,
    cells,
    effect_cells,
    num,
    run_of,
    score_text,
    short_commit,
)
from orchard.lab.notebook.chart_cache import ChartCache
from orchard.lab.notebook.charts import Chart, unjudged
from orchard.lab.notebook.journal import when
from orchard.lab.notebook.view import ExperimentView, LabView

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:78em;padding:0 1em;color:#222}
h1{margin-bottom:.2em} h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em} th,td{border:1px solid #ddd;padding:.25em .5em;
text-align:left;vertical-align:top} td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.LAND{color:#1a7f1a;font-weight:bold}.KILL{color:#c01818;font-weight:bold}.ITERATE{color:#c76a00;font-weight:bold}
pre{background:#f6f6f6;padding:.5em;overflow-x:auto;font-size:.85em;white-space:pre-wrap;margin:.3em 0}
.chart{min-height:360px;margin:.5em 0}.muted{color:#666}.feed article{border-left:3px solid #ccc;padding-left:.7em;
margin:.8em 0} details{margin:.4em 0}
"""
CHART_SCRIPT = """
function orchardDraw(figures){
  for (const f of figures){
    const el = document.getElementById(f.id);
    if (el) Plotly.react(el, f.figure.data, f.figure.layout, {displaylogo:false, responsive:true});
  }
}
"""


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


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], numeric: Sequence[int] = ()) -> str:
    """A table of already-escaped cells; `numeric` columns align right."""
    def cell(tag: str, index: int, text: str) -> str:
        return f"<{tag}{' class=num' if index in numeric else ''}>{text}</{tag}>"
    lines = ["<table><tr>" + "".join(cell("th", i, escape(h)) for i, h in enumerate(head)) + "</tr>"]
    lines += ["<tr>" + "".join(cell("td", i, c) for i, c in enumerate(row)) + "</tr>" for row in rows]
    return "\n".join(lines) + "</table>"


def _decision(e: ExperimentView) -> str:
    label = e.decision or e.status
    return f"<span class='{escape(label)}'>{escape(label)}</span>"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def summary(view: LabView) -> str:
    d = view.decisions
    state = f"stopped: {escape(view.stopped)}" if view.stopped else (
        f"{len(view.workers)} of {view.worker_slots} workers busy" if view.started_at else "not started")
    started = when(view.started_at) if view.started_at else "-"
    return (f"<p>workspace <code>{escape(view.workspace)}</code> · started {started} · base "
            f"<code>{escape(short_commit(view.base))}</code> · executor {escape(view.executor)}</p>"
            f"<p><b>{state}</b> · {len(view.experiments)} experiments: {d.get('LAND', 0)} LAND, "
            f"{d.get('KILL', 0)} KILL, {d.get('ITERATE', 0)} ITERATE</p>")


def workers(view: LabView) -> str:
    if not view.workers:
        return "<p class=muted>no worker is running</p>"
    rows = [[escape(w.experiment), escape(w.worker), escape(w.launcher), escape(w.status), _minutes(w.elapsed_s),
             escape(w.host), "<pre>" + escape("\n".join(w.log_tail) or "(no output yet)") + "</pre>"]
            for w in view.workers]
    return _table(("experiment", "worker", "launcher", "state", "elapsed", "host", "log tail"), rows, (4,))


def lock(view: LabView) -> str:
    lk = view.lock
    holder = f"pid {lk.holder_pid} ({escape(lk.holder_label or '?')})" if lk.holder_pid else "-"
    since = when(lk.holder_since) if lk.holder_since else "-"
    queue = ", ".join(f"pid {pid}" for pid in lk.queue) or "nobody"
    waits = view.lock_waits[-8:]
    recent = ", ".join(f"{escape(w.kind)} {escape(w.experiment or '')} {w.wait_ms / 1000:.2f} s" for w in waits)
    return (
        f"<p>measurement lock <b>{escape(lk.state)}</b>; "
        f"{'holder' if lk.state == 'held' else 'last holder'}: {holder} since {since}; queue: {queue}</p>"
        f"<p class=muted>recent waits per verdict: {recent or 'none recorded'} · <code>{escape(lk.path)}</code></p>"
    )


def backlog(view: LabView) -> str:
    if not view.backlog:
        return "<p class=muted>the backlog is empty</p>"
    rows = [
        [str(i + 1), escape(b.id), score_text(b.score), escape(b.lane), escape(b.title)]
        for i, b in enumerate(view.backlog)
    ]
    return _table(("rank", "hypothesis", "score", "lane", "title"), rows, (0, 2))


def leaderboard(view: LabView) -> str:
    if not view.leaderboard:
        return "<p class=muted>nothing measured yet</p>"
    rows = []
    for r in view.leaderboard:
        change = "-" if r.effect is None else f"<code>{escape(r.by)}</code> ({escape(short_commit(r.commit))})"
        rows.append([escape(r.metric), f"{escape(r.direction)} is better", num(r.baseline), change,
                     *map(escape, effect_cells(r.effect, r.final))])
    # every number a paired effect with its interval: no median of one campaign divided by another's
    return _table(("metric", "direction", "baseline (start)", "best change", "its effect [interval]",
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


def experiment_list(view: LabView) -> str:
    if not view.experiments:
        return "<p class=muted>no experiment yet</p>"
    out = []
    for e in view.experiments:
        reasons = "".join(f"<li>{escape(r)}</li>" for r in e.reasons)
        head = (
            f"<details open data-experiment='{escape(e.name)}'><summary><code>{escape(e.name)}</code> · "
            f"{_decision(e)} · worker {escape(e.worker)} ({escape(e.lane)}) · {escape(e.title)}</summary>"
        )
        parts = [head, f"<ul>{reasons}</ul>" if reasons else ""]
        if e.verdict is not None:
            parts.append(_verdict(e.verdict))
        out.append("".join(parts) + "</details>")
    return "\n".join(out)


def _verdict(v: VerdictView) -> str:
    """A verdict's head, its table (the journal's cells) and its gates."""
    return (f"<p>Verdict <b>{escape(v.verdict)}</b> {escape(run_of(v))}</p>"
            + _table(COLUMNS, ([escape(c) for c in cells(m)] for m in v.metrics), (2, 4, 5, 6, 7, 8))
            + "".join(f"<p>gate <code>{escape(g.name)}</code>: {'pass' if g.passed else 'FAIL'} "
                      f"({escape(g.detail)})</p>" for g in v.gates))


def final(view: LabView) -> str:
    """Main at the end against main at the start, the one paired verdict FINAL_REPORT.md prints."""
    done = view.final
    if done is None:
        return "<p class=muted>not measured yet: the lab measures it when it stops</p>"
    if not done.moved or done.verdict is None:
        return f"<p>main did not move from <code>{escape(short_commit(done.start))}</code>: nothing to compare</p>"
    return (f"<p>main <code>{escape(short_commit(done.end))}</code> against main at the start "
            f"<code>{escape(short_commit(done.start))}</code>, paired:</p>" + _verdict(done.verdict))


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
    sections = {"summary": summary(view)}
    if live:
        sections |= {"workers": workers(view), "lock": lock(view)}
    sections |= {
        "leaderboard": leaderboard(view),
        "final": final(view),
        "chart-main": _chart_divs(charts.main),
        "chart-experiments": _chart_divs(charts.experiments) + unjudged_list(view),
        "chart-activity": _chart_divs(charts.activity),
        "experiments": experiment_list(view),
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
    "backlog": "Backlog (ranked)",
    "journal": "Journal",
}


def body(page: Page) -> str:
    return "\n".join(
        (f"<h2>{TITLES[key]}</h2>" if TITLES[key] else "") + f"<section id='{key}'>{html}</section>"
        for key, html in page.sections.items()
    )


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
        f"{body(page)}<script>{CHART_SCRIPT}\norchardDraw({figures});</script></body></html>\n"
    )


def dashboard_html() -> str:
    """The live dashboard's page: it fetches the sections and charts from /api/page while the lab runs."""
    return (
        resources.files("orchard.lab")
        .joinpath("templates/dashboard.html")
        .read_text(encoding="utf-8")
        .replace("/*STYLE*/", STYLE)
        .replace("/*CHARTS*/", CHART_SCRIPT)
        .replace(
            "<!--SECTIONS-->",
            "\n".join(
                (f"<h2>{TITLES[key]}</h2>" if TITLES[key] else "") + f"<section id='{key}'></section>" for key in TITLES
            ),
        )
    )
