"""A lab's landed wins, read back from lab.db, and their groups: wins whose files overlap go together.

A landed win is an experiment merged into the lab's main and not reverted.
What it changed is the patch the judge judged last (on the main it merged
into, when it was rebased), in lab.db with its judgment; its confirmation
verdict is the journal's. Two wins that touch one file cannot be merged one
without the other in either order, so they share a branch, in the order the
lab merged them; a win touching no file of another stands alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchard.lab.db.state import LabState
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.records.judgment import Judgment
from orchard.lab.records.land_steps import Confirmed, Merged, Rebased, Reverted
from orchard.lab.records.verdict import Verdict
from orchard.lab.workers.workspace.patches import patch_files


@dataclass(frozen=True)
class Win:
    """One landed win: its experiment, hypothesis, the judgment of what merged, and the lab's confirmation."""

    name: str
    hypothesis: Hypothesis
    judgment: Judgment
    files: tuple[str, ...]
    merge_commit: str
    confirmation: Verdict | None
    rebased: bool  # judged again on a main that had moved since its base


def landed_wins(state: LabState) -> list[Win]:
    """The wins merged into the lab's main and not reverted, in the order they were merged."""
    reverted = {e.experiment for e in state.events_of(Reverted)}
    confirmed = {e.experiment: e.event.verdict for e in state.events_of(Confirmed)}
    rebased = {e.experiment for e in state.events_of(Rebased) if e.event.needed}
    wins = []
    for merged in state.events_of(Merged):
        name = merged.experiment or ""
        record = state.experiment(name)
        if name in reverted or record.judgment is None or not record.judgment.patch:
            continue
        hypothesis = state.hypothesis(record.hypothesis).hypothesis
        wins.append(Win(name, hypothesis, record.judgment, tuple(patch_files(record.judgment.patch)),
                        merged.event.commit, confirmed.get(name), name in rebased))
    return list({w.name: w for w in wins}.values())  # a merge found again after a restart counts once


def groups(wins: Sequence[Win]) -> list[tuple[Win, ...]]:
    """The wins in groups whose files overlap (transitively), each in merge order, groups by their first win."""
    found: list[list[Win]] = []
    for win in wins:
        touching = [g for g in found if any(set(win.files) & set(w.files) for w in g)]
        merged = [w for g in touching for w in g] + [win]
        found = [g for g in found if g not in touching] + [merged]
    order = {w.name: index for index, w in enumerate(wins)}
    ordered = [tuple(sorted(g, key=lambda w: order[w.name])) for g in found]
    return sorted(ordered, key=lambda g: order[g[0].name])


def label(wins: Sequence[str]) -> str:
    """A group's name within its lab: `<first win>`, with `+<n>` when more wins go with it."""
    more = f"+{len(wins) - 1}" if len(wins) > 1 else ""
    return f"{wins[0]}{more}"


def branch_name(lab: str, group: Sequence[Win]) -> str:
    """`review/<lab>/<label>`: under the lab's name, as its `lab/<lab>/...` branches are, so two labs on one
    target whose wins share a name never share (or move) a review branch."""
    return f"review/{lab}/{label([win.name for win in group])}"
