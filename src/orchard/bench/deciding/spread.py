"""One side's samples as hyperfine and pyperf users read them first: mean ± σ and min … max.

The verdict decides on medians and paired differences; these are shown beside the median so a reader can see
how wide the runs were without opening the rows. Every form (terminal, `--json`, CSV, Markdown) reads them
from the one `MetricResult`.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from orchard.units import quantity


@dataclass(frozen=True)
class Spread:
    """Mean, sample standard deviation (0 for a single run), smallest and largest of one side's runs."""

    mean: float
    sd: float
    min: float
    max: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread | None:
        """The spread of some runs; None when there are none."""
        numbers = [float(v) for v in values]
        if not numbers:
            return None
        sd = statistics.stdev(numbers) if len(numbers) > 1 else 0.0
        return cls(statistics.fmean(numbers), sd, min(numbers), max(numbers))

    def mean_text(self, metric: str) -> str:
        """`52.9 ms ± 1.20 ms`, each number in the metric's unit."""
        return f"{quantity(self.mean, metric)} ± {quantity(self.sd, metric)}"

    def range_text(self, metric: str) -> str:
        """`51.0 ms … 56.3 ms`."""
        return f"{quantity(self.min, metric)} … {quantity(self.max, metric)}"

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Spread | None:
        if data is None:
            return None
        return cls(float(data["mean"]), float(data["sd"]), float(data["min"]), float(data["max"]))
