"""`orchard backlog`: the ranked hypotheses listed, added and ranked again."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from orchard.cli.lab_commands import open_lab, print_added
from orchard.cli.options import workspace_argument
from orchard.lab.records.hypothesis import Lane

if TYPE_CHECKING:
    from orchard.lab.records.db import HypothesisRecord


@click.group("backlog")
def backlog_group() -> None:
    """The ranked hypotheses: list, add, rank."""


def _print_ranked(records: list[HypothesisRecord], revisited: frozenset[str]) -> None:
    """Hypotheses, best first: rank, id, score, status (and whether a win revisited its kill), lane, title
    (control characters shown escaped)."""
    from orchard.lab.text import visible

    for rank, r in enumerate(records, 1):
        h = r.hypothesis
        status = f"{r.status}, revisited" if r.id in revisited else r.status
        click.echo(f"{rank:>3}. {visible(r.id):<32} {h.score:6.2f}  {status:<8} {h.lane:<8} {visible(h.title)}")


@backlog_group.command("list")
@workspace_argument
@click.option("--json", "as_json", is_flag=True, help="Print the backlog as JSON.")
@click.option("--all", "show_all", is_flag=True, help="Include attempted hypotheses.")
def backlog_list(workspace: Path, as_json: bool, show_all: bool) -> None:
    """The open hypotheses, best score first."""
    import json as jsonlib

    from orchard.lab.db.ranking import ranked, revisited
    from orchard.lab.records.hypothesis import HypothesisStatus

    statuses = tuple(HypothesisStatus) if show_all else (HypothesisStatus.OPEN,)
    with open_lab(workspace) as (_, state):
        records, again = ranked(state, statuses), revisited(state)
    if as_json:
        click.echo(
            jsonlib.dumps(
                [
                    {"id": r.id, "status": r.status, "revisited": r.id in again, "score": r.hypothesis.score,
                     **r.hypothesis.to_dict()}
                    for r in records
                ],
                indent=2,
            )
        )
        return
    if not records:
        attempted = "" if show_all else " of open hypotheses (--all shows the attempted ones too)"
        click.echo(f"the backlog is empty{attempted}: add some with `orchard backlog add {workspace} --file FILE`")
        return
    _print_ranked(records, again)


@backlog_group.command("add")
@workspace_argument
@click.option("--file", "file_path", type=click.Path(path_type=Path), help="A TOML file of [[hypothesis]] tables.")
@click.option(
    "--from-opportunities",
    "from_opportunities",
    type=click.IntRange(0, 1000),
    default=0,
    metavar="N",
    help="Add the N largest gaps from the latest rows (cause left for a planner; at most 1000).",
)
@click.option("--id", "hypothesis_id", default="", help="Id (default: made from the title).")
@click.option("--title", default="")
@click.option("--metric", default="", help="<scenario>/<metric> of the lab's suite.")
@click.option("--current-value", default="")
@click.option("--cause", "suspected_cause", default="", help="Where in the code the cost comes from.")
@click.option("--change", default="", help="The change to try.")
@click.option("--predicted", "predicted_effect", type=float, default=None,
              help="Relative effect, e.g. -0.3 (at least -1).")
@click.option("--scope", multiple=True, help="A file or glob the worker may touch (repeatable).")
@click.option("--impact", type=float, default=3.0, show_default=True, help="1 to 5.")
@click.option("--confidence", type=float, default=0.5, show_default=True, help="Above 0, at most 1.")
@click.option("--effort", type=float, default=2.0, show_default=True, help="1 to 5.")
@click.option("--lane", type=click.Choice([lane.value for lane in Lane]), default=Lane.EXPLOIT.value, show_default=True)
@click.option("--patch", type=click.Path(path_type=Path), default=None, help="A ready patch for the patch launcher.")
def backlog_add(
    workspace: Path,
    file_path: Path | None,
    from_opportunities: int,
    hypothesis_id: str,
    title: str,
    metric: str,
    current_value: str,
    suspected_cause: str,
    change: str,
    predicted_effect: float | None,
    scope: tuple[str, ...],
    impact: float,
    confidence: float,
    effort: float,
    lane: str,
    patch: Path | None,
) -> None:
    """Add hypotheses: from a TOML file, from the opportunities ranking, or from flags."""
    from orchard.lab.loop import backlog_add
    from orchard.lab.records.hypothesis import Hypothesis
    from orchard.lab.text import visible

    with open_lab(workspace) as (ws, state):
        if file_path is not None:
            result = backlog_add.add_file(ws, state, file_path)
        elif from_opportunities:
            result = backlog_add.add_opportunities(ws, state, from_opportunities)
        else:
            hypothesis = Hypothesis.from_fields(
                source="flags", id=hypothesis_id, title=title, metric=metric, current_value=current_value,
                suspected_cause=suspected_cause, change=change, scope=list(scope), impact=impact,
                confidence=confidence, effort=effort, lane=lane, predicted_effect=predicted_effect,
                patch=None if patch is None else str(patch.resolve()))
            result = backlog_add.add_one(ws, state, hypothesis)
    print_added(result.added)
    for refused in result.refused:  # one line each, after those added
        click.echo(visible(refused.reason()))


@backlog_group.command("rank")
@workspace_argument
def backlog_rank(workspace: Path) -> None:
    """Rank the open hypotheses again and rewrite backlog.md."""
    from orchard.lab.db.ranking import ranked, revisited
    from orchard.lab.notebook import backlog_file
    from orchard.lab.notebook.files import write_atomic

    with open_lab(workspace) as (ws, state):
        write_atomic(ws.root / "backlog.md", backlog_file.render(state))
        records, again = ranked(state), revisited(state)
    _print_ranked(records, again)
    click.echo(f"wrote {ws.root / 'backlog.md'}")

