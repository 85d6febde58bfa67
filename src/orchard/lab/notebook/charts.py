"""The lab's charts, one set for the live dashboard and report.html.

Plotly draws them: its JavaScript ships inside the `plotly` wheel
(`plotly.min.js`), so the dashboard serves it and report.html inlines it
with no CDN and no network. The figures are plotly's JSON figure format,
written here as plain data: plotly's Python figure objects validate every
property and expand a template, which cost more than the rest of the final
report together (docs/benchmarks-loop.md); the tests check every figure
against plotly's schema instead (`plotly.graph_objects.Figure`).

What each chart claims is what a verdict measured:

- main over time: one step per change that reached main, its effect against
  the lab's start with the interval, the noise floor as a band. Steps a
  sweep measured are paired against the first baseline; the others chain
  each main check (paired against the previous main), their intervals
  multiplied bound by bound (never narrower than the truth).
- experiments: each experiment's effect against its own base, with its
  interval, coloured by decision; no line joins experiments, since each has
  its own base.
- activity: lock waits per verdict and the number of busy workers.

A deterministic metric has no interval and no noise: it is drawn as its
exact values, labelled, never as a line.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from orchard.lab.judge.measuring import Direction
from orchard.lab.judge.verdict_view import MetricEffect, floor_pct, interval, measured, pct, short_commit
from orchard.lab.notebook.view import ExperimentView, LabView
from orchard.lab.records.judgment import Decision

COLOURS = {Decision.LAND: "#2ca02c", Decision.KILL: "#d62728", Decision.ITERATE: "#ff7f0e"}
PENDING_COLOUR = "#7f7f7f"
FLOOR_FILL = "rgba(120, 120, 120, 0.18)"
HEIGHT = 360
GRID = "#EBF0F8"
# plotly's "plotly_white" look, the few properties of it these charts show (a named template is not JSON)
WHITE = {"paper_bgcolor": "white", "plot_bgcolor": "white", "font": {"color": "#2a3f5f"},
         "hovermode": "closest", "hoverlabel": {"align": "left"}}
AXIS = {"gridcolor": GRID, "linecolor": GRID, "zerolinecolor": GRID, "zerolinewidth": 2}


@dataclass(frozen=True)
class Chart:
    """One figure: `id` names it in a page, `figure` is plotly's JSON."""

    id: str
    title: str
    figure: str


def unit(metric: str) -> str:
    """The unit a metric's name declares (`wall_ms`, `stdout_bytes`), or none."""
    name = metric.rsplit("/", 1)[-1]
    for suffix, label in (("_ms", "ms"), ("_s", "s"), ("_bytes", "bytes"), ("_tokens", "tokens")):
        if name.endswith(suffix):
            return label
    return ""


def _utc(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")


def _pct_points(effect: MetricEffect) -> tuple[float, float, float] | None:
    """Effect and its interval's distances below and above it, in percent."""
    if effect.effect is None:
        return None
    value = effect.effect * 100
    low = value if effect.low is None else effect.low * 100
    high = value if effect.high is None else effect.high * 100
    return value, max(0.0, value - low), max(0.0, high - value)


def _effects(effects: Sequence[MetricEffect], **error_style: Any) -> dict[str, Any]:
    """A trace's y values and error bars: each effect and its interval, in percent."""
    triples = [_pct_points(m) for m in effects]
    return {"y": [t[0] if t else None for t in triples],
            "error_y": {"type": "data", "symmetric": False, "array": [t[2] if t else None for t in triples],
                        "arrayminus": [t[1] if t else None for t in triples], **error_style}}


def _better(view: LabView, key: str) -> str:
    return f"{view.directions.get(key, Direction.LOWER)} is better"


def _layout(title: str, x_title: str, y_title: str, **extra: Any) -> dict[str, Any]:
    """Axis titles get their own room (automargin, a standoff from the tick labels); a long y title is cut into
    lines at its ` · `: one line of it was longer than the plot is high, and the browser clipped both ends. The
    legend sits above the plot, where rotated tick labels and the x title cannot run into it."""
    return {"title": {"text": title, "x": 0.05}, "height": HEIGHT, "margin": {"l": 70, "r": 30, "t": 80, "b": 40},
            "xaxis": {**AXIS, "title": {"text": x_title, "standoff": 12}, "showline": True, "ticks": "outside",
                      "automargin": True},
            "yaxis": {**AXIS, "title": {"text": y_title.replace(" · ", "<br>"), "standoff": 8}, "showline": True,
                      "ticks": "outside", "zeroline": True, "automargin": True},
            "legend": {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"}, **WHITE, **extra}


def _exact_layout(title: str, x_title: str, key: str, better: str, values: Sequence[float | None]) -> dict[str, Any]:
    """A layout for a deterministic metric's exact values. A count (bytes, tokens) is ticked in whole units with
    the labels' thousands separator: plotly split a 1,121-1,123 byte range into `1121`, `1,121.5`, `1122`."""
    layout = _layout(title, x_title, f"{key} ({unit(key) or 'value'}), exact · {better}")
    if unit(key) in ("bytes", "tokens"):
        shown = [v for v in values if v is not None]
        layout["yaxis"]["tickformat"] = ",d"
        if shown and max(shown) - min(shown) < 10:
            layout["yaxis"]["dtick"] = 1  # plotly's own step for a short range is a fraction
    return layout


def _percent_layout(title: str, x_title: str, y_title: str, floor: float) -> dict[str, Any]:
    """A layout for effects in percent, the noise floor drawn as a band around zero."""
    layout = _layout(title, x_title, y_title, shapes=[{
        "type": "rect", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": -floor * 100, "y1": floor * 100,
        "fillcolor": FLOOR_FILL, "line": {"width": 0}, "layer": "below"}])
    layout["yaxis"]["ticksuffix"] = "%"
    return layout


def _floor_legend(floor: float) -> dict[str, Any]:
    """A legend entry for the band (shapes have none)."""
    return {"type": "scatter", "x": [None], "y": [None], "mode": "markers", "name": f"noise floor ±{floor_pct(floor)}",
            "marker": {"symbol": "square", "size": 12, "color": FLOOR_FILL}}


def _finite(value: Any) -> Any:
    """JSON that a browser parses: a NaN or infinity becomes null, as plotly's own encoder writes it."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _chart(chart_id: str, title: str, data: list[dict[str, Any]], layout: dict[str, Any],
           at: Sequence[float] = ()) -> Chart:
    """The figure as JSON; a time axis with a single moment gets a minute either side (not milliseconds); a point's
    label is drawn whole where it crosses the plot's edge (over the highest point, beside the last), not cut."""
    if at and max(at) - min(at) < 1.0:
        layout["xaxis"]["range"] = [_utc(min(at) - 60), _utc(max(at) + 60)]
    for trace in data:
        if "text" in trace:
            trace["cliponaxis"] = False
    layout["margin"]["r"] = max(layout["margin"]["r"], 80 if any("right" in t.get("textposition", "") for t in data)
                                else 0)
    return Chart(chart_id, title, json.dumps(_finite({"data": data, "layout": layout}), ensure_ascii=False))


# -- (1) main over time -----------------------------------------------------------------------------------------


def main_over_time(view: LabView) -> list[Chart]:
    charts = []
    for key in view.metrics():
        points = [(step, m) for step in view.main_steps for m in step.effects if m.key == key]
        if not points:
            continue
        title = f"main over time: {key}"
        exact = all(m.exact for _, m in points[1:]) if len(points) > 1 else points[0][1].exact
        labels = [f"{short_commit(step.commit)} {step.label}" if step.commit else step.label for step, _ in points]
        times = [_utc(step.at) for step, _ in points]
        how = ["paired with the lab's start" if step.paired_with_start else "chained main checks"
               for step, _ in points]
        if exact:
            data: list[dict[str, Any]] = [{
                "type": "scatter",
                "x": times,
                "y": [m.candidate for _, m in points],
                "mode": "markers+text",
                "name": "main (exact value)",
                "text": [measured(m, m.candidate) for _, m in points],
                "textposition": "top center",
                "marker": {"size": 10, "symbol": "diamond", "color": "#1f77b4"},
                "customdata": labels,
                "hovertemplate": "%{customdata}<br>%{y} " + unit(key) + "<extra></extra>",
            }]
            layout = _exact_layout(title, "time (UTC)", key, _better(view, key), [m.candidate for _, m in points])
        else:
            floor = view.floors.get(key, 0.0)
            data = [{
                "type": "scatter",
                "x": times,
                **_effects([m for _, m in points], visible=True),
                "mode": "lines+markers+text",
                "name": "main vs start",
                "line": {"shape": "hv", "color": "#1f77b4"},
                "text": [short_commit(step.commit) for step, _ in points],
                "textposition": "top center",
                "customdata": [
                    [label, pct(m.effect), interval(m.low, m.high), h]
                    for label, (_, m), h in zip(labels, points, how, strict=True)
                ],
                "hovertemplate": "%{customdata[0]}<br>effect %{customdata[1]} %{customdata[2]}<br>%{customdata[3]}"
                "<extra></extra>",
            }, _floor_legend(floor)]
            layout = _percent_layout(title, "time (UTC)", f"change vs lab start (%) · {_better(view, key)}", floor)
        charts.append(_chart(f"main-{_slug(key)}", title, data, layout, [step.at for step, _ in points]))
    return charts


# -- (2) experiments ------------------------------------------------------------------------------------------------


def _judged(view: LabView) -> list[ExperimentView]:
    return [e for e in view.experiments if e.verdict is not None and e.verdict.metrics]


def unjudged(view: LabView) -> list[ExperimentView]:
    """Experiments with no verdict, finished or not: listed beside the chart with their reason."""
    return [e for e in view.experiments if e.verdict is None or not e.verdict.metrics]


def experiments(view: LabView) -> list[Chart]:
    charts = []
    judged = _judged(view)
    for key in view.metrics():
        rows = [(e, m) for e in judged if e.verdict for m in e.verdict.metrics if m.key == key]
        if not rows:
            continue
        title = f"experiments: {key}"
        data: list[dict[str, Any]] = []
        exact = all(m.exact for _, m in rows)
        for decision in (*Decision, None):
            mine = [(e, m) for e, m in rows if e.decision == decision]
            if not mine:
                continue
            colour = PENDING_COLOUR if decision is None else COLOURS[decision]
            trace: dict[str, Any] = {
                "type": "scatter",
                "x": [e.name for e, _ in mine],
                "mode": "markers+text",
                "name": str(decision or "not decided"),
                "customdata": [
                    [e.name, e.decision or e.status, m.verdict, pct(m.effect), interval(m.low, m.high),
                     floor_pct(m.floor), m.n, measured(m, m.baseline), measured(m, m.candidate)]
                    for e, m in mine
                ],
                "hovertemplate": "%{customdata[0]} (%{customdata[1]})<br>%{customdata[2]} %{customdata[3]} "
                "%{customdata[4]}<br>floor %{customdata[5]}, n %{customdata[6]}<br>base %{customdata[7]} → "
                "candidate %{customdata[8]}<extra></extra>",
            }
            if exact:
                trace |= {"y": [m.candidate for _, m in mine],
                          "text": [f"{measured(m, m.baseline)} → {measured(m, m.candidate)}" for _, m in mine],
                          "textposition": "top center",
                          "marker": {"color": colour, "size": 11, "symbol": "diamond"}}
            else:
                trace |= {**_effects([m for _, m in mine], color=colour),
                          "text": [pct(m.effect) for _, m in mine],
                          "textposition": "middle right",
                          "marker": {"color": colour, "size": 10}}
            data.append(trace)
        x_title = "experiment (each against its own base)"
        if exact:
            layout = _exact_layout(title, x_title, key, _better(view, key), [m.candidate for _, m in rows])
        else:
            floor = view.floors.get(key, max(m.floor for _, m in rows))
            data.append(_floor_legend(floor))
            layout = _percent_layout(title, x_title, f"effect vs its base (%) · {_better(view, key)}", floor)
        layout["xaxis"] |= {"type": "category", "tickangle": -30}
        charts.append(_chart(f"experiments-{_slug(key)}", title, data, layout))
    return charts


# -- (3) lock waits and worker utilisation --------------------------------------------------------------------


def activity(view: LabView) -> Chart | None:
    if not view.busy and not view.lock_waits:
        return None
    title = "lock waits and busy workers"
    data: list[dict[str, Any]] = []
    if view.busy:
        data.append({
            "type": "scatter",
            "x": [_utc(b.at) for b in view.busy],
            "y": [b.workers for b in view.busy],
            "mode": "lines",
            "name": "busy workers",
            "line": {"shape": "hv", "color": "#1f77b4"},
            "hovertemplate": "%{x}<br>%{y} busy<extra></extra>",
        })
    if view.lock_waits:
        data.append({
            "type": "bar",
            "x": [_utc(w.at) for w in view.lock_waits],
            "y": [round(w.wait_ms / 1000, 3) for w in view.lock_waits],
            "name": "lock wait per verdict (s)",
            "yaxis": "y2",
            "marker": {"color": "#9467bd"},
            "customdata": [[w.kind, w.experiment or ""] for w in view.lock_waits],
            "hovertemplate": "%{customdata[0]} %{customdata[1]}<br>waited %{y} s<extra></extra>",
        })
    layout = _layout(title, "time (UTC)", f"busy workers (of {view.worker_slots})")
    layout["yaxis"] |= {"range": [0, view.worker_slots + 0.5], "dtick": 1}
    # its own margin: without automargin the right axis's title was drawn over its tick labels
    layout["yaxis2"] = {**AXIS, "title": {"text": "lock wait (s)", "standoff": 8}, "overlaying": "y", "side": "right",
                        "showline": True, "ticks": "outside", "rangemode": "tozero", "automargin": True,
                        "showgrid": False}
    return _chart("activity", title, data, layout, [b.at for b in view.busy] + [w.at for w in view.lock_waits])
