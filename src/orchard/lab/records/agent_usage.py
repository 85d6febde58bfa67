"""AgentUsage: the cost and tokens an agent CLI reported, as a typed record.

Launchers read it from a worker's log, the candidate carries it, the journal
and the lab's budget read it; whatever the agent printed that is not a
number stays "not reported" rather than becoming a wrong figure. A cost
orchard worked out from the tokens (a CLI that prints none) is marked
`estimated`, and every page that shows it says so (notebook/spending.py's
`cost_text`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from orchard.lab.records.hypothesis import finite_number


@dataclass(frozen=True)
class AgentUsage:
    """Cost and tokens as the agent CLI reported them; None: not reported."""

    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    turns: int | None = None
    source: str | None = None  # what the numbers were read from
    estimated: bool = False  # the cost was worked out from the tokens and a price table (config/prices.py)

    def __post_init__(self) -> None:
        """The agent's figures as numbers: whatever else it printed there (text, nan, a list) is "not reported"."""
        for key in ("cost_usd", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "turns"):
            value = getattr(self, key)
            if value is not None and not (finite_number(value) and value >= 0):
                object.__setattr__(self, key, None)
        if self.source is not None:
            object.__setattr__(self, "source", str(self.source)[:200])

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if not self.estimated:
            del data["estimated"]  # as records written before estimates were
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentUsage:
        return cls(**{key: data[key] for key in cls.__dataclass_fields__ if key in data})


