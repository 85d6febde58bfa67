"""The lineage drawn: one SVG, made here from the records, so the page needs no script to show it.

One row per experiment, in the order they started, so fifty experiments read top to bottom without a line
crossing a label. Main runs down the left: the lab's base on top, then a commit on the row of each experiment
a LAND merged (a line from the experiment to it). An experiment sits one step further right per ITERATE
between its hypothesis and the first one, and a dashed line joins it to the experiment whose ITERATE made
its hypothesis. Colour says the decision; every node links to the experiment and names it in its tooltip.
"""

from __future__ import annotations

from orchard.lab.judge.verdict_view import short_commit
from orchard.lab.notebook.lineage import Href, Lineage, LineageExperiment
from orchard.lab.text import html_text as escape

ROW = 24  # px between two experiments: 12px text with air around it
TOP = 44  # the legend, then main's base
MAIN_X = 96  # main's line; its commits' names to its left
FIRST_X = 160  # experiments of a first hypothesis; each ITERATE one STEP further right
STEP = 36
CHAR = 7.4  # px per character of the 12px monospace labels
LABEL = 56  # characters of a label at most
COLOURS = {"LAND": "#1a7f37", "KILL": "#c01818", "ITERATE": "#b26a00"}
OTHER = "#6b6b6b"
MAIN = "#3050c0"


def _depths(lin: Lineage) -> dict[str, int]:
    """How many ITERATEs lie between each hypothesis and the first one it came from."""
    parents = {h.id: h.parent for h in lin.hypotheses}
    depths: dict[str, int] = {}
    for start in parents:
        depth, seen, current = 0, {start}, parents[start]
        while current in parents and current not in seen:
            seen.add(current)
            depth, current = depth + 1, parents[current]
        depths[start] = depth
    return depths


def _iterated_from(lin: Lineage, row: int) -> int | None:
    """The row of the experiment whose ITERATE made this one's hypothesis: the parent's last before it."""
    parents = {h.id: h.parent for h in lin.hypotheses}
    parent = parents.get(lin.experiments[row].hypothesis)
    earlier = [i for i, e in enumerate(lin.experiments[:row]) if e.hypothesis == parent]
    iterated = [i for i in earlier if lin.experiments[i].decision == "ITERATE"]
    found = iterated or earlier
    return found[-1] if found else None


def _down_and_in(x0: float, y0: float, x1: float, y1: float) -> str:
    """Out of the parent's left, down just left of its column (no node there), right into the child."""
    run = x0 - 14
    return f"M{x0 - 6} {y0} Q{run} {y0} {run} {y0 + 8} V{y1 - 8} Q{run} {y1} {run + 8} {y1} H{x1 - 6}"


def _merged(lin: Lineage, e: LineageExperiment) -> str | None:
    """The commit its LAND made on main, from its record or the journal's merge."""
    return e.merged_as or next((m.commit for m in lin.merges if m.experiment == e.name), None)


def _label(e: LineageExperiment) -> str:
    text = f"{e.name} · {e.decision}"
    return text if len(text) <= LABEL else text[:LABEL - 1] + "…"


def _node(e: LineageExperiment, x: float, y: float, href: Href) -> str:
    colour = COLOURS.get(e.decision, OTHER)
    return (f"<g class='node' data-experiment='{escape(e.name)}'><a href='{escape(href(e.name))}'>"
            f"<title>{escape(e.name)}: {escape(e.decision)}, hypothesis {escape(e.hypothesis)}, from "
            f"{escape(short_commit(e.base))}</title><circle cx='{x}' cy='{y}' r='6' fill='{colour}'/>"
            f"<text x='{x + 12}' y='{y + 4}'>{escape(_label(e))}</text></a></g>")


def _commit(commit: str, what: str, y: float) -> str:
    return (f"<g class='commit' data-commit='{escape(commit)}'><title>main {escape(commit)}: {escape(what)}</title>"
            f"<rect x='{MAIN_X - 5}' y='{y - 5}' width='10' height='10' fill='{MAIN}'/>"
            f"<text x='{MAIN_X - 10}' y='{y + 4}' text-anchor='end'>{escape(short_commit(commit)[:8])}</text></g>")


def _legend() -> tuple[str, float]:
    """The legend's SVG and how wide it is (the graph is at least as wide: nothing cut off)."""
    items = [(COLOURS["LAND"], "LAND"), (COLOURS["KILL"], "KILL"), (COLOURS["ITERATE"], "ITERATE"),
             (OTHER, "other or at work")]
    x, parts = 8.0, []
    for colour, word in items:
        parts.append(f"<circle cx='{x + 6}' cy='14' r='6' fill='{colour}'/><text x='{x + 16}' y='18'>{word}</text>")
        x += 30 + CHAR * len(word)
    parts.append(f"<path d='M{x} 14 h28' stroke='{COLOURS['ITERATE']}' stroke-dasharray='4 3' fill='none'/>"
                 f"<text x='{x + 34}' y='18'>ITERATE child</text>")
    x += 48 + CHAR * len("ITERATE child")
    parts.append(f"<path d='M{x} 14 h28' stroke='{COLOURS['LAND']}' stroke-width='2'/>"
                 f"<rect x='{x + 28}' y='9' width='10' height='10' fill='{MAIN}'/>"
                 f"<text x='{x + 44}' y='18'>merged into main</text>")
    return f"<g class='legend'>{''.join(parts)}</g>", x + 52 + CHAR * len("merged into main")


def lineage_svg(lin: Lineage, href: Href) -> str:
    """The graph, or nothing before the first experiment (the trees say so)."""
    if lin.empty:
        return ""
    depths = _depths(lin)
    xs = [FIRST_X + STEP * depths.get(e.hypothesis, 0) for e in lin.experiments]
    ys = [TOP + ROW * (row + 1) for row in range(len(lin.experiments))]
    edges: list[str] = []
    commits: list[str] = [] if lin.base is None else [_commit(lin.base, "the lab's base", TOP)]
    last = TOP
    for row, e in enumerate(lin.experiments):
        source = _iterated_from(lin, row)
        if source is not None:
            x0, y0, x1, y1 = xs[source], ys[source], xs[row], ys[row]
            edges.append(f"<path class='edge iterate' data-from='{escape(lin.experiments[source].name)}' "
                         f"data-to='{escape(e.name)}' d='{_down_and_in(x0, y0, x1, y1)}' "
                         f"stroke='{COLOURS['ITERATE']}' stroke-dasharray='4 3' fill='none'/>")
        commit = _merged(lin, e)
        if commit is not None:
            last = ys[row]
            edges.append(f"<path class='edge merge' data-from='{escape(e.name)}' d='M{xs[row] - 6} {ys[row]} "
                         f"H{MAIN_X + 5}' stroke='{COLOURS['LAND']}' stroke-width='2'/>")
            commits.append(_commit(commit, f"merge of {e.name}", ys[row]))
    nodes = [_node(e, xs[row], ys[row], href) for row, e in enumerate(lin.experiments)]
    legend, legend_width = _legend()
    width = max(max(xs) + 12 + CHAR * max(len(_label(e)) for e in lin.experiments) + 16, legend_width)
    height = ys[-1] + ROW
    main_line = f"<path d='M{MAIN_X} {TOP} V{last}' stroke='{MAIN}' stroke-width='3'/>" if commits else ""
    return (f"<div class='lineage-graph' style='overflow-x:auto'><svg xmlns='http://www.w3.org/2000/svg' "
            f"role='img' aria-label='lineage of {len(nodes)} experiments' width='{width:.0f}' height='{height}' "
            f"viewBox='0 0 {width:.0f} {height}' font-family='ui-monospace,monospace' font-size='12'>"
            f"{legend}{main_line}{''.join(edges)}{''.join(commits)}{''.join(nodes)}</svg></div>")

