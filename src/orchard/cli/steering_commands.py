"""Steering a lab while it runs: `stop`, `pause` and `resume` (lab/loop/steering.py carries them out).

Each journals what was asked, with who asked (`--by`, default the user running it), and prints what will
happen; the running lab acts at its next pass, or the next `orchard run` does.
"""

from __future__ import annotations

import getpass
from pathlib import Path

import click

from orchard.cli.lab_commands import open_lab
from orchard.cli.options import budget_options

_BY = click.option("--by", default=None, help="Who asks, as the journal records it (default: the user running this).")


@click.command()
@click.argument("workspace", type=click.Path(path_type=Path))
@click.argument("experiment")
@click.option("--kill", is_flag=True, help="KILL its hypothesis (default: back to the backlog, not retried this run).")
@_BY
def stop(workspace: Path, experiment: str, kill: bool, by: str | None) -> None:
    """Stop one experiment's worker: never judged; its hypothesis back to the backlog, or KILLed with --kill."""
    from orchard.lab.loop.steering import ask_stop

    with open_lab(workspace) as (ws, state):
        click.echo(ask_stop(ws, state, experiment, requeue=not kill, by=by or getpass.getuser()))


@click.command()
@click.argument("workspace", type=click.Path(path_type=Path))
@_BY
def pause(workspace: Path, by: str | None) -> None:
    """Pause the lab: no new workers; the running ones finish and are judged. Survives a restart."""
    from orchard.lab.loop.steering import pause as pause_lab

    with open_lab(workspace) as (ws, state):
        click.echo(pause_lab(ws, state, by or getpass.getuser()))


@click.command()
@click.argument("workspace", type=click.Path(path_type=Path))
# each limit is a `[stop]` key of orchard.toml (docs/configuration.md), written there
@budget_options
@click.option("--max-experiments", type=int, help="The experiments budget (0: no limit).")
@click.option("--top-attempted", type=int, help="Stop once the top N backlog items have all been attempted.")
@click.option("--idle-loops", type=int, help="Stop after N loops in a row that land nothing.")
@_BY
def resume(workspace: Path, by: str | None, **limits: float | None) -> None:
    """Resume a paused lab; each limit given is written into orchard.toml's [stop] first (or edit it by hand)."""
    from orchard.lab.loop.steering import resume as resume_lab

    given = {key: value for key, value in limits.items() if value is not None}
    with open_lab(workspace) as (ws, state):
        click.echo(resume_lab(ws, state, by or getpass.getuser(), given))
