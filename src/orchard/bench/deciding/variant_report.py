"""What a verdict says about its held-out variants: which were made (and the seed that made them), whether the
win held on each, and why an input got none. Its own module so that `verdict.py` carries it without importing
how variants are made or judged."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

WIN_NOT_HELD = "the win does not hold on inputs the worker never saw"


@dataclass(frozen=True)
class VariantCheck:
    """One variant of one input, judged: `held` is None when there was no win on its scenario to check."""

    scenario: str  # the variant's name in the rows: `<scenario>~<perturbation>`
    origin: str  # the bench scenario whose input it varies
    perturbation: str
    source: str  # the input it was made from, as the bench names it
    held: bool | None = None
    detail: str = ""  # per improved target metric: the bench's effect and the variant's

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VariantCheck:
        held = data.get("held")
        return cls(str(data["scenario"]), str(data["origin"]), str(data["perturbation"]), str(data["source"]),
                   None if held is None else bool(held), str(data.get("detail", "")))


@dataclass(frozen=True)
class VariantReport:
    seed: int
    checks: tuple[VariantCheck, ...] = ()
    notes: tuple[str, ...] = ()  # inputs no variant could be made of, and variants left out, with why

    def line(self) -> str:
        """One line for a terminal, a journal, a CI summary."""
        if not self.checks:
            return f"held-out variants (seed {self.seed}): none " + (
                "could be made: " + "; ".join(self.notes) if self.notes else "(every scenario says variants = [])")
        held = [c for c in self.checks if c.held is not None]
        failed = [c.scenario for c in held if not c.held]
        judged = (f"the win held on all {len(held)}" if held and not failed else
                  f"{WIN_NOT_HELD}: {', '.join(failed)}" if failed else "no win to check on them")
        made = ", ".join(c.scenario for c in self.checks)
        return (f"held-out variants (seed {self.seed}): {made}; {judged}"
                + ("" if not self.notes else "; " + "; ".join(self.notes)))

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "checks": [asdict(c) for c in self.checks], "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VariantReport:
        return cls(int(data["seed"]), tuple(VariantCheck.from_dict(c) for c in data.get("checks", [])),
                   tuple(str(n) for n in data.get("notes", [])))
