"""What a contention run is asked for: subjects, worker counts, commits per worker, modes, deadlines; checked
before anything runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from orchard.bench.lanes.session import check_common
from orchard.bench.suites.flows import Flow
from orchard.bench.suites.subjects import Subject
from orchard.errors import UsageError

MODES = ("shared_checkout", "clone_per_worker")


DEFAULT_COMMITS = 5


DEFAULT_RETRY_DEADLINE_S = 300.0


DEFAULT_STEP_TIMEOUT_S = 120.0


def parse_workers(text: str) -> list[int]:
    """`--workers 2,8,32`: positive integers."""
    counts: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdecimal() or int(part) < 1:
            raise UsageError(f"--workers {text!r}: {part!r} is not a positive integer")
        counts.append(int(part))
    return counts


@dataclass
class ContentionOptions:
    subjects: list[Subject]
    flows: Mapping[str, Flow]
    results: Path
    workers: list[int] = field(default_factory=lambda: [2, 8, 32])
    commits: int = DEFAULT_COMMITS
    modes: Sequence[str] = MODES
    runs: int = 1
    retry_deadline_s: float = DEFAULT_RETRY_DEADLINE_S
    step_timeout_s: float = DEFAULT_STEP_TIMEOUT_S
    keep_workdirs: bool = False
    workdir: Path | None = None

    def validate(self) -> None:
        if self.commits < 1:
            raise UsageError(f"--commits must be at least 1, not {self.commits}")
        check_common(self.runs, self.subjects)
        unknown = [mode for mode in self.modes if mode not in MODES]
        if unknown:
            raise UsageError(f"unknown contention mode {unknown[0]!r}; valid: {', '.join(MODES)}")
