"""The command line. Thin: parse, call the library, print, pick the exit code.

Exit codes: 0 success (for `verdict`: not regressed), 1 regressed or failed,
2 usage or configuration error, with one clear message naming the bad input.
Heavy modules are imported inside the commands so `orchard --help` is fast.
One module per group of commands; this one holds the root group, which lists them, and `main`.
"""

from __future__ import annotations

import click

from orchard import __version__
from orchard.cli import backlog_commands, bench_commands, lab_commands, steering_commands, verdict_commands
from orchard.cli.extras import needing_lab
from orchard.errors import OrchardError, UsageError


class _Group(click.Group):
    """Turns orchard's errors from anywhere below into one message:
    `UsageError` exits 2, any other `OrchardError` (a failed measurement) exits 1."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except UsageError as error:
            click.echo(f"orchard: error: {error}", err=True)
            ctx.exit(2)
        except OrchardError as error:
            click.echo(f"orchard: {error}", err=True)
            ctx.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="orchard")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars or notes (warnings and results still print).")
def cli(quiet: bool) -> None:
    """orchard: an optimization research lab for a codebase.

    Agent workers try ranked hypotheses in their own checkouts; every
    candidate is rebuilt from clean and judged by a noise-aware verdict with
    absolute quality gates; wins land as described commits, losers are
    journaled. `orchard bench` and `orchard verdict` work alone as a
    benchmark harness.
    """
    if quiet:  # the lock's waiting notes too, from every thread of the process (the waits are in the rows)
        from orchard.bench.lock import quiet_waits

        quiet_waits()


for _command in (
    verdict_commands.verdict, verdict_commands.compare, verdict_commands.calibrate,
    verdict_commands.calibration_key,
    bench_commands.bench, bench_commands.opportunities, bench_commands.history,
):
    cli.add_command(_command)
for _command in (  # a light install (the bench and the verdict) has not the lab's packages: these say so first
    lab_commands.init, lab_commands.run, lab_commands.status, lab_commands.plan, lab_commands.report,
    lab_commands.recover, lab_commands.finalize, lab_commands.review,
    lab_commands.serve, lab_commands.demo,
    steering_commands.stop, steering_commands.pause, steering_commands.resume,
    backlog_commands.backlog_group,
):
    cli.add_command(needing_lab(_command))


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM cleans up like Ctrl-C: workers, servers and measured children are stopped."""
    raise KeyboardInterrupt


def main() -> None:
    import signal

    signal.signal(signal.SIGTERM, _terminate)
    cli(prog_name="orchard")

