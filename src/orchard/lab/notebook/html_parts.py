"""The pieces every page of the lab shares: its style, sortable tables, tabs, a verdict as a table.

The dashboard, report.html and the experiment pages are built from these,
so a table sorts and a verdict reads the same everywhere. Sorting and tabs
are a few lines of plain JavaScript (no library): a table sorts by the column
header clicked, numbers by their value in its unit (`62.4 µs` below `1.2 ms`),
and the sort holds when the live page replaces the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from orchard.lab.judge.verdict_view import COLUMNS, VerdictView, cells, run_of
from orchard.lab.text import html_text as escape

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:78em;padding:0 1em;color:#222}
h1{margin-bottom:.2em} h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em} th,td{border:1px solid #ddd;padding:.25em .5em;
text-align:left;vertical-align:top} td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.LAND{color:#1a7f1a;font-weight:bold}.KILL{color:#c01818;font-weight:bold}.ITERATE{color:#c76a00;font-weight:bold}
pre{background:#f6f6f6;padding:.5em;overflow-x:auto;font-size:.85em;white-space:pre-wrap;margin:.3em 0}
.chart{min-height:360px;margin:.5em 0}.muted{color:#666}.feed article{border-left:3px solid #ccc;padding-left:.7em;
margin:.8em 0} details{margin:.4em 0}
table.sortable th{cursor:pointer;user-select:none} table.sortable th[data-dir=asc]::after{content:" ▲"}
table.sortable th[data-dir=desc]::after{content:" ▼"}
.tabs{display:flex;flex-wrap:wrap;gap:.2em;border-bottom:2px solid #ddd;margin:1em 0 0}
.tabs button{border:1px solid #ddd;border-bottom:0;background:#f6f6f6;padding:.4em .9em;cursor:pointer;font:inherit}
.tabs button[aria-selected=true]{background:#fff;font-weight:bold;border-color:#999}
.tab[hidden]{display:none} ul.tree{list-style:none;padding-left:1.1em;border-left:1px dotted #bbb}
.agent-log .log-item{border-left:3px solid #ccc;padding:.2em .6em;margin:.35em 0}
.agent-log .message{border-color:#1f77b4}.agent-log .tool-call{border-color:#9467bd}
.agent-log .tool-result{border-color:#bbb}.agent-log .result{border-color:#2ca02c}
.agent-log .error{border-color:#c01818;color:#8a1010}.agent-log .thinking{color:#666}
"""
CHART_SCRIPT = """
function orchardDraw(figures){
  for (const f of figures){
    const el = document.getElementById(f.id);
    if (el) Plotly.react(el, f.figure.data, f.figure.layout, {displaylogo:false, responsive:true});
  }
}
"""
# A cell's sort key: its number scaled by its unit, else its text. Tabs: show one .tab, redraw its charts' width.
PAGE_SCRIPT = """
const UNITS = {ns:1e-6, 'µs':1e-3, ms:1, s:1e3, min:6e4, B:1, KB:1e3, MB:1e6, GB:1e9, K:1e3, M:1e6, G:1e9, T:1e12};
function orchardKey(text){
  if (/^\\d{4}-\\d\\d-\\d\\d/.test(text.trim())) return [1, text.trim()];  // a time: its text sorts
  const m = text.trim().replace(/−/g, '-').match(/^([+-]?[\\d,]*\\.?\\d+)\\s*(ns|µs|ms|s|min|B|KB|MB|GB|K|M|G|T|%)?/);
  if (!m) return [1, text.trim().toLowerCase()];
  return [0, parseFloat(m[1].replace(/,/g, '')) * (UNITS[m[2]] || 1)];
}
function orchardSort(table, column, dir){
  const rows = [...table.querySelectorAll('tr')].slice(1);
  rows.sort((a, b) => {
    const x = orchardKey(a.cells[column]?.innerText || ''), y = orchardKey(b.cells[column]?.innerText || '');
    const c = x[0] - y[0] || (x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0);
    return dir === 'asc' ? c : -c;
  });
  for (const row of rows) row.parentNode.appendChild(row);
  table.querySelectorAll('th').forEach((th, i) => {
    if (i === column) th.dataset.dir = dir; else delete th.dataset.dir;
  });
  table.dataset.sorted = column + ':' + dir;
}
document.addEventListener('click', (event) => {
  const th = event.target.closest('table.sortable th');
  if (!th) return;
  const table = th.closest('table');
  orchardSort(table, th.cellIndex, th.dataset.dir === 'asc' ? 'desc' : 'asc');
  const section = table.closest('section');
  if (section) (window.orchardSorts = window.orchardSorts || {})[section.id] = table.dataset.sorted;
});
function orchardResort(section){
  const sorted = (window.orchardSorts || {})[section.id];
  const table = section.querySelector('table.sortable');
  if (sorted && table) { const [c, d] = sorted.split(':'); orchardSort(table, Number(c), d); }
}
function orchardTab(name){
  document.querySelectorAll('.tabs button').forEach(b => b.setAttribute('aria-selected', b.dataset.tab === name));
  document.querySelectorAll('.tab').forEach(t => { t.hidden = t.id !== 'tab-' + name; });
  if (!window.Plotly) return;
  document.querySelectorAll('#tab-' + name + ' .js-plotly-plot').forEach(p => Plotly.Plots.resize(p));
}
document.addEventListener('click', (event) => {
  const b = event.target.closest('.tabs button');
  if (b) { orchardTab(b.dataset.tab); history.replaceState(null, '', '#' + b.dataset.tab); return; }
  const a = event.target.closest('a[href^="#"]');
  const target = a && document.getElementById(a.getAttribute('href').slice(1));
  const tab = target && target.closest('.tab');
  if (tab) { orchardTab(tab.id.slice(4)); if (target.tagName === 'DETAILS') target.open = true; }
});
window.addEventListener('DOMContentLoaded', () => {
  const name = location.hash.slice(1);
  if (document.getElementById('tab-' + name)) orchardTab(name);
});
"""


def table(head: Sequence[str], rows: Iterable[Sequence[str]], numeric: Sequence[int] = (), *,
          sortable: bool = True) -> str:
    """A table of already-escaped cells; `numeric` columns align right; a click on a header sorts by it."""
    def cell(tag: str, index: int, text: str) -> str:
        return f"<{tag}{' class=num' if index in numeric else ''}>{text}</{tag}>"
    lines = [f"<table{' class=sortable' if sortable else ''}><tr>"
             + "".join(cell("th", i, escape(h)) for i, h in enumerate(head)) + "</tr>"]
    lines += ["<tr>" + "".join(cell("td", i, c) for i, c in enumerate(row)) + "</tr>" for row in rows]
    return "\n".join(lines) + "</table>"


def decision(label: str) -> str:
    return f"<span class='{escape(label)}'>{escape(label)}</span>"


def verdict_html(v: VerdictView) -> str:
    """A verdict's head, its table (the journal's cells), its gates and its advice; a gate that failed before
    any statistics leaves no metric to show: a line says so, not a table with a head only."""
    failed = any(not g.passed for g in v.gates)
    metrics = table(COLUMNS, ([escape(c) for c in cells(m)] for m in v.metrics), (2, 4, 5, 6, 7, 8)) if v.metrics \
        else "<p class=muted>no metric compared: " + ("a gate failed before any statistics (below)</p>" if failed
                                                     else "nothing was measured</p>")
    return (f"<p>Verdict <b>{escape(v.verdict)}</b> {escape(run_of(v))}</p>" + metrics
            + "".join(f"<p>gate <code>{escape(g.name)}</code>: {'pass' if g.passed else 'FAIL'} "
                      f"({escape(g.detail)})</p>" for g in v.gates)
            + "".join(f"<p class=advice>advice: {escape(advice)}</p>" for advice in v.advice))


def tabs(named: Sequence[tuple[str, str, str]]) -> str:
    """Tab buttons and their panels, the first shown: (name, label, inner HTML) each."""
    buttons = "".join(f"<button type=button data-tab='{escape(name)}' aria-selected={'true' if i == 0 else 'false'}>"
                      f"{escape(label)}</button>" for i, (name, label, _) in enumerate(named))
    panels = "".join(f"<div class=tab id='tab-{escape(name)}'{' hidden' if i else ''}>{inner}</div>"
                     for i, (name, _, inner) in enumerate(named))
    return f"<nav class=tabs role=tablist>{buttons}</nav>{panels}"
