"""`orchard backlog add`: hypotheses from a file, from the opportunities ranking or from one set of fields.

Each is checked against what the lab can run: a metric its suite measures
(an opportunity names a lane's metric, which the suite need not measure, so
those are not held to it), a launcher orchard.toml defines, and the ready
patch the `patch` launcher applies (an opportunity is a placeholder a planner
sharpens, so it is not held to that either). All are added
or none, but for near-duplicates of earlier hypotheses (near_duplicates.py): those are refused, each named,
and the rest added. backlog.md is written again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from orchard.errors import UsageError
from orchard.lab.db.state import LabState
from orchard.lab.judge.measuring import metric_keys, opportunities
from orchard.lab.loop import backlog
from orchard.lab.loop.near_duplicates import Refused
from orchard.lab.notebook import backlog_file
from orchard.lab.notebook.files import write_atomic
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.workers.workspace.workspace import Workspace


@dataclass(frozen=True)
class Additions:
    """What `orchard backlog add` did: the hypotheses it added, and the near-duplicates it refused."""

    added: tuple[Hypothesis, ...]
    refused: tuple[Refused, ...]


def add_file(ws: Workspace, state: LabState, path: Path) -> Additions:
    """The [[hypothesis]] tables of a TOML file."""
    return _added(ws, state, backlog.load_file(path), source="user", origin=str(path))


def add_opportunities(ws: Workspace, state: LabState, top: int) -> Additions:
    """The `top` largest gaps of the lab's latest rows, the cause left for a planner."""
    hypotheses = backlog.from_opportunities(opportunities(ws), top)
    if not hypotheses:
        raise UsageError(f"no opportunities in {ws.results_dir}: run a lane there first")
    return _added(ws, state, hypotheses, source="opportunities", origin=f"the opportunities in {ws.results_dir}",
                  suite_metrics=False)


def add_one(ws: Workspace, state: LabState, hypothesis: Hypothesis) -> Additions:
    """One hypothesis given field by field (`Hypothesis.from_fields`)."""
    return _added(ws, state, [hypothesis], source="user", origin="flags")


def _added(ws: Workspace, state: LabState, hypotheses: Sequence[Hypothesis], *, source: str, origin: str,
           suite_metrics: bool = True) -> Additions:
    refused = backlog.add_all(state, hypotheses, source=source, origin=origin,
                              metrics=metric_keys(ws) if suite_metrics else [],
                              launchers={name: launcher.name for name, launcher in ws.config.launchers.items()},
                              default_launcher=ws.config.launcher.name if suite_metrics else "")
    write_atomic(ws.root / "backlog.md", backlog_file.render(state))
    left_out = {r.hypothesis.id for r in refused}
    return Additions(tuple(h for h in hypotheses if h.id not in left_out), tuple(refused))
