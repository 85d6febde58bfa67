"""When wall time cannot decide: a typed warning that names what to measure instead.

A timing metric whose noise floor or minimum detectable effect (MDE) is wider
than the smallest change that matters (the suite's `no_change_within`, or the
metric's floor in the suite) can neither see a change of that size nor claim
NO-CHANGE within it: more pairs at this noise rarely help. The verdict says so
once per such metric, and names the alternative that applies here: `cpu_ms` for
a CPU-bound scenario whose suite judges wall time only, instruction counts
(`measure = ["instructions"]`) when valgrind or perf can count them. A record,
not free text, so the dashboard and the journal show the same advice. `decide.advise` decides when it applies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

WALL, CPU, INSTRUCTIONS = "wall_ms", "cpu_ms", "instructions"
CPU_BOUND = 0.5  # the baseline's cpu_ms over its wall_ms, in its least contended run, from this share up


class Alternative(StrEnum):
    """A quieter metric that can judge what a noisy timing metric cannot."""

    CPU_MS = "cpu_ms"
    INSTRUCTIONS = 'measure = ["instructions"]'


@dataclass(frozen=True)
class NoiseAdvice:
    """One timing metric too noisy for the smallest change that matters, and what to measure instead."""

    metric: str  # scenario/metric
    width: float  # relative: the floor, or the MDE when wider
    threshold: float  # relative: the smallest change that matters
    alternatives: tuple[Alternative, ...]  # empty: neither applies on this suite and machine

    def line(self) -> str:
        """The advice in one line, as every display prints it."""
        said = (f"{self.metric} cannot decide changes of {self.threshold:.2%}: its floor or MDE is "
                f"{self.width:.2%}; ")
        if self.alternatives:
            return said + "judge " + " or ".join(f"`{a}`" for a in self.alternatives) + " instead"
        return said + ("neither `cpu_ms` (not CPU-bound, or judged already) nor `measure = [\"instructions\"]` "
                       "(no valgrind or perf here, or measured already) applies: more pairs or a quieter machine")

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "width": self.width, "threshold": self.threshold,
                "alternatives": [str(a) for a in self.alternatives], "line": self.line()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NoiseAdvice:
        return cls(str(data["metric"]), float(data["width"]), float(data["threshold"]),
                   tuple(Alternative(a) for a in data.get("alternatives", [])))
