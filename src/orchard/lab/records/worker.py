"""A worker's directory, its checkouts at one experiment's bases, and the names both may have.

Every path is computed from the worker's root when it is needed, never
stored (`workers/workspace/workspace.py` makes the directories and the clones).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from orchard.errors import UsageError

# The worker writes its report here, inside its target checkout (every agent
# CLI may write there); the checkout ignores it, so it is never in the diff.
REPORT_NAME = ".orchard-report.json"
# The worker's own copy of the baseline build (ignored): judge/ is never in a prompt.
BASELINE_COPY = ".orchard-baseline"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check_name(kind: str, name: str) -> str:
    """Worker and experiment names become directory, file and tmux window names."""
    if not _NAME.match(name) or name.endswith(".") or ".." in name:
        raise UsageError(
            f"{kind} name {name!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a "
            "letter or digit"
        )
    return name


@dataclass(frozen=True)
class WorkerDir:
    """A worker's directory and its two checkouts (which may not exist yet)."""

    name: str
    root: Path

    @property
    def target_dir(self) -> Path:
        return self.root / "target"

    @property
    def bench_dir(self) -> Path:
        return self.root / "bench"

    @property
    def report_path(self) -> Path:
        return self.target_dir / REPORT_NAME

    baseline_copy = property(lambda self: self.target_dir / BASELINE_COPY)  # its own copy of the baseline

    @property
    def home_dir(self) -> Path:
        """Its private HOME: nothing of the orchestrator's home (keys, agent logins) reaches a worker."""
        return self.root / "home"

    @property
    def tmp_dir(self) -> Path:
        """Its private TMPDIR."""
        return self.root / "tmp"


@dataclass(frozen=True)
class WorkerCheckout:
    """A worker set up for one experiment: its checkouts sit at these base commits."""

    worker: WorkerDir
    target_base: str
    bench_base: str
