"""Where each experiment came from and where it went: ITERATE children, the base it started from, its merge.

Two trees from the same records. By hypothesis: a hypothesis, the
experiments that tried it, and the sharpened children an ITERATE made of it
(each child's own experiments under it). By main: the lab's base, then each
commit a LAND merged into main (which experiment, on top of which commit),
and under every one of these commits the experiments that started from it, so
an experiment that began before a merge reads as such.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from orchard.lab.judge.verdict_view import short_commit
from orchard.lab.records.db import ExperimentRecord, HypothesisRecord, JournalEvent, Unrecognized, of_type
from orchard.lab.records.events import Event
from orchard.lab.records.land_steps import Merged
from orchard.lab.text import html_text as escape

Href = Callable[[str], str]


@dataclass(frozen=True)
class LineageExperiment:
    name: str
    hypothesis: str
    decision: str  # its decision, or its status while undecided
    base: str  # the target commit it started from
    merged_as: str | None  # the merge commit on main, when it landed


@dataclass(frozen=True)
class LineageHypothesis:
    id: str
    title: str
    parent: str | None  # the hypothesis an ITERATE sharpened into this one


@dataclass(frozen=True)
class MainMerge:
    experiment: str | None
    commit: str
    previous: str


@dataclass(frozen=True)
class Lineage:
    base: str | None  # main when the lab started
    hypotheses: tuple[LineageHypothesis, ...]
    experiments: tuple[LineageExperiment, ...]
    merges: tuple[MainMerge, ...]

    @property
    def empty(self) -> bool:
        return not self.experiments


def lineage(base: str | None, hypotheses: Sequence[HypothesisRecord], experiments: Sequence[ExperimentRecord],
            events: Sequence[JournalEvent[Event | Unrecognized]]) -> Lineage:
    tried = {e.hypothesis for e in experiments}
    known = {h.id: h for h in hypotheses}
    # a hypothesis is shown when an experiment tried it or it leads to one that did (an untried backlog stays out)
    shown: set[str] = set()
    for hypothesis_id in tried:
        while hypothesis_id in known and hypothesis_id not in shown:
            shown.add(hypothesis_id)
            hypothesis_id = known[hypothesis_id].parent or ""
    return Lineage(
        base=base,
        hypotheses=tuple(LineageHypothesis(h.id, h.hypothesis.title, h.parent) for h in hypotheses if h.id in shown),
        experiments=tuple(LineageExperiment(e.name, e.hypothesis, str(e.decision or e.status), e.target_base,
                                            e.merge_commit) for e in experiments),
        merges=tuple(MainMerge(m.experiment, m.event.commit, m.event.previous) for m in of_type(events, Merged)),
    )


def _experiment(e: LineageExperiment, href: Href) -> str:
    merged = f" · merged as <code>{escape(short_commit(e.merged_as))}</code>" if e.merged_as else ""
    return (f"<li data-experiment='{escape(e.name)}'><a href='{escape(href(e.name))}'><code>{escape(e.name)}"
            f"</code></a> <span class='{escape(e.decision)}'>{escape(e.decision)}</span> · from "
            f"<code>{escape(short_commit(e.base))}</code>{merged}</li>")


def _hypothesis_tree(lin: Lineage, href: Href, parent: str | None, seen: set[str]) -> str:
    items = []
    for h in lin.hypotheses:
        if h.parent != parent and not (parent is None and h.parent not in {x.id for x in lin.hypotheses}):
            continue
        if h.id in seen:
            continue
        seen.add(h.id)
        mine = "".join(_experiment(e, href) for e in lin.experiments if e.hypothesis == h.id)
        children = _hypothesis_tree(lin, href, h.id, seen)
        label = "ITERATE child " if h.parent else ""
        items.append(f"<li data-hypothesis='{escape(h.id)}'>{label}hypothesis <code>{escape(h.id)}</code> "
                     f"{escape(h.title)}<ul>{mine}{children}</ul></li>")
    return "".join(items)


def _main_tree(lin: Lineage, href: Href) -> str:
    commits: list[tuple[str, str]] = [(lin.base or "", "the lab's base")] if lin.base else []
    commits += [(m.commit, f"merge of {m.experiment or '?'} onto {short_commit(m.previous)}") for m in lin.merges]
    known = {c for c, _ in commits}
    items = []
    for commit, what in commits:
        started = "".join(_experiment(e, href) for e in lin.experiments if e.base == commit)
        items.append(f"<li data-commit='{escape(commit)}'>main <code>{escape(short_commit(commit))}</code> "
                     f"({escape(what)}); experiments started from it:<ul>{started or '<li>none</li>'}</ul></li>")
    others = "".join(_experiment(e, href) for e in lin.experiments if e.base not in known)
    if others:
        items.append(f"<li>from other commits:<ul>{others}</ul></li>")
    return "".join(items)


def lineage_html(lin: Lineage, href: Href) -> str:
    """Both trees; `href` links an experiment to its page (the dashboard's) or its entry (report.html's)."""
    if lin.empty:
        return "<p class=muted>no experiment yet</p>"
    return (f"<div class=lineage><h3>By hypothesis (ITERATE children under their parent)</h3>"
            f"<ul class=tree>{_hypothesis_tree(lin, href, None, set())}</ul>"
            f"<h3>By main: what merged into what, and where each experiment started</h3>"
            f"<ul class=tree>{_main_tree(lin, href)}</ul></div>")
