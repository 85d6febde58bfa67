"""The opportunities ranking as records: what `opportunities.rank` hands the lab's backlog, planner and sweep,
and what `orchard opportunities --json` writes (`Ranking.to_json`, schema `orchard.opportunities/1`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from orchard.bench.deciding.verdict import Direction

SCHEMA = "orchard.opportunities/1"


@dataclass(frozen=True)
class Part:
    """Where a gap goes: one of the subject's parts (a flow step of a total, a command of a step)."""

    part: str
    value: float
    comparator_value: float
    share: float  # of the subject's whole cost


@dataclass(frozen=True)
class Opportunity:
    """A subject trailing the best comparator on one (scenario, operation, metric)."""

    lane: str
    scenario: str
    operation: str
    level: str  # total | step
    metric: str
    direction: Direction
    subject: str
    value: float
    runs: int
    remote_transport: str | None
    comparator: str
    comparator_value: float
    comparator_transport: str | None
    gap: float
    gap_ratio: float  # (value - best) / max(best, floor)
    weight: float
    score: float  # weight x gap_ratio: the ranking's key
    where: tuple[Part, ...]
    note: str | None  # the flows' own words for the steps the gap lies in
    rank: int = 0  # 1 for the largest score, once ranked

    def places(self, count: int = 3) -> str:
        """The first parts the gap lies in, by name."""
        return ", ".join(part.part for part in self.where[:count])


@dataclass(frozen=True)
class Source:
    """A lane's newest run file the ranking read."""

    lane: str
    file: str
    bench_id: str
    rows: int


@dataclass(frozen=True)
class Ranking:
    results: str
    sources: tuple[Source, ...]
    weights: dict[str, float]
    floors: dict[str, float]
    items: tuple[Opportunity, ...]  # largest score first
    not_compared: tuple[str, ...]  # lanes with fewer than two subjects measured, and why

    def to_json(self, top: int | None = None) -> dict[str, Any]:
        """The document `--json` prints (its first `top` items only, when given)."""
        shown = dataclasses.replace(self, items=self.items[:top]) if top else self
        return {"schema": SCHEMA, **dataclasses.asdict(shown)}
