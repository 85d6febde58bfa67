"""backlog.md: every hypothesis in the backlog's order, open ones ranked, the rest after them."""

from __future__ import annotations

from orchard.lab.db.ranking import ranked, revisited
from orchard.lab.db.state import LabState
from orchard.lab.judge.verdict_view import score_text
from orchard.lab.records.hypothesis import HypothesisStatus
from orchard.lab.text import inline


def render(state: LabState) -> str:
    lines = [
        "# Backlog",
        "",
        "Ranked by score = impact x confidence / effort. Rendered from lab.db.",
        "",
        "| rank | id | lane | score | status | metric | predicted | scope | title |",
        "|---:|---|---|---:|---|---|---:|---|---|",
    ]
    done = (HypothesisStatus.RUNNING, HypothesisStatus.ITERATED, HypothesisStatus.LANDED, HypothesisStatus.KILLED)
    order = ranked(state) + ranked(state, done)
    again = revisited(state)
    for rank, record in enumerate(order, 1):
        h = record.hypothesis
        lines.append(
            f"| {rank if record.status == HypothesisStatus.OPEN else '-'} | `{record.id}` | {h.lane} | "
            f"{score_text(h.score)} | {record.status}{', revisited' if record.id in again else ''} | "
            f"{inline(h.metric)} | {h.predicted_text} | "
            f"{inline(', '.join(h.scope) or 'any')} | {inline(h.title)} |"
        )
    return "\n".join(lines) + "\n"
