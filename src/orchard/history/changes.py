"""`orchard history`: the series read, their change points found, shown as a table, as JSON, as charts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from orchard.errors import UsageError
from orchard.history import chart
from orchard.history.detection import MAX_PVALUE, MIN_MAGNITUDE, Detected, detect_all
from orchard.history.series import from_labs, from_rows
from orchard.lab.judge.verdict_view import pct, short_commit
from orchard.units import quantity

HISTORY_SCHEMA = "orchard.history/1"


def history(results: Path | None, labs: Sequence[Path], *, max_pvalue: float | None = None,
            min_magnitude: float | None = None, chart_file: Path | None = None) -> list[Detected]:
    """Every series of the results directory and the labs, with its change points (and the charts written);
    None: Otava's significance (0.001), changes of 2% or more."""
    if results is None and not labs:
        raise UsageError("orchard history: give a results directory (--results) or lab workspaces (--lab)")
    max_pvalue = MAX_PVALUE if max_pvalue is None else max_pvalue
    min_magnitude = MIN_MAGNITUDE if min_magnitude is None else min_magnitude
    if not 0 < max_pvalue < 1:
        raise UsageError(f"--max-pvalue must be between 0 and 1 (got {max_pvalue})")
    if min_magnitude < 0:
        raise UsageError(f"--min-magnitude must be 0 or more (got {min_magnitude})")
    series = [*(from_rows(results) if results is not None else []), *from_labs(labs)]
    found = detect_all(series, max_pvalue=max_pvalue, min_magnitude=min_magnitude)
    if chart_file is not None:
        what = f"{len(series)} series; change points by Apache Otava's E-divisive detection at p <= {max_pvalue:g}"
        chart_file.write_text(chart.page(found, what), encoding="utf-8")
    return found


def table(found: Sequence[Detected]) -> Group:
    """An aligned table, one row per change point with its values in the metric's unit, then one line naming
    the series without any."""
    shown = Table(show_edge=False, header_style="bold")
    for column in ("metric", "subject", "where", "runs", "change at run", "commit", "before", "after", "change",
                   "p-value"):
        shown.add_column(column, justify="left" if column in ("metric", "subject", "where", "commit") else "right")
    for d in found:
        s = d.series
        for c in d.change_points:
            shown.add_row(s.metric, s.subject, s.where, str(len(s.points)), str(c.index), short_commit(c.commit),
                          quantity(c.before, s.metric), quantity(c.after, s.metric), pct(c.change), f"{c.pvalue:.2g}")
    parts: list[RenderableType] = [shown] if shown.row_count else []
    quiet = [d.series for d in found if not d.change_points]
    if quiet:
        parts.append(Text("no change point: " + ", ".join(f"{s.metric} ({s.subject}, {len(s.points)} runs)"
                                                          for s in quiet)))
    return Group(*parts)


def to_json(found: Sequence[Detected]) -> str:
    return json.dumps({"schema": HISTORY_SCHEMA, "series": [d.to_dict() for d in found]}, indent=2)
