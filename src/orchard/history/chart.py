"""The history as charts: each series run after run, its levels, and its change points marked.

Drawn with the dashboard's chart code (its layout, look and page script),
into one HTML file that needs no network (plotly inlined, as report.html).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from typing import Any

from orchard.history.detection import Detected
from orchard.history.series import values
from orchard.lab.judge.verdict_view import pct, short_commit
from orchard.lab.notebook.charts import Chart, _chart, _layout, _slug, unit
from orchard.lab.notebook.pages import CHART_SCRIPT, STYLE, plotly_js

VALUE = "#1f77b4"
LEVEL = "#7f7f7f"
CHANGE = "#d62728"


def chart(found: Detected) -> Chart:
    """One series: its values by run (the commit in each point's hover), each level's mean, a line per change."""
    series = found.series
    numbers = values(series)
    runs = list(range(len(numbers)))
    hover = [f"{short_commit(p.commit)}<br>{p.source}" for p in series.points]
    data: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines+markers", "x": runs, "y": list(numbers), "name": series.metric,
         "text": hover, "hovertemplate": "%{text}<br>%{y}<extra></extra>", "line": {"color": VALUE}}]
    edges = [0, *(c.index for c in found.change_points), len(numbers)]
    for start, end in zip(edges, edges[1:], strict=False):
        level = sum(numbers[start:end]) / max(1, end - start)
        data.append({"type": "scatter", "mode": "lines", "x": [start, end - 1], "y": [level, level],
                     "name": "level", "showlegend": start == 0, "line": {"color": LEVEL, "dash": "dot"},
                     "hoverinfo": "skip"})
    shapes, notes = [], []
    for c in found.change_points:
        shapes.append({"type": "line", "xref": "x", "x0": c.index - 0.5, "x1": c.index - 0.5, "yref": "paper",
                       "y0": 0, "y1": 1, "line": {"color": CHANGE, "dash": "dash"}})
        notes.append({"x": c.index - 0.5, "y": 1, "yref": "paper", "showarrow": False, "yanchor": "bottom",
                      "text": f"{pct(c.change)} at {short_commit(c.commit)} (p={c.pvalue:.2g})",
                      "font": {"color": CHANGE}})
    y_title = f"{series.metric} ({unit(series.metric)})" if unit(series.metric) else series.metric
    title = f"{series.metric} · {series.subject} · {len(found.change_points)} change point(s)"
    layout = _layout(title, "run (oldest first)", y_title, shapes=shapes, annotations=notes)
    return _chart(f"history-{_slug(series.metric)}-{_slug(series.subject)}", title, data, layout)


def page(found: Sequence[Detected], what: str) -> str:
    """One self-contained HTML page with every series' chart."""
    charts = [chart(d) for d in found if d.series.points]
    figures = json.dumps([{"id": c.id, "figure": json.loads(c.figure)} for c in charts]).replace("</", "<\\/")
    sections = "".join(f"<div class=chart id='{escape(c.id)}'></div>" for c in charts)
    return ("<!doctype html><html lang=en><head><meta charset='utf-8'><title>orchard history</title>"
            f"<link rel=icon href='data:,'><style>{STYLE}</style><script>{plotly_js()}</script></head><body>"
            f"<h1>orchard history</h1><p class=muted>{escape(what)}</p>{sections}"
            f"<script>{CHART_SCRIPT}\norchardDraw({figures});</script></body></html>\n")
