"""The command line. Thin: parse, call the library, print, pick the exit code.

Exit codes: 0 success (for `verdict`: not regressed), 1 regressed or failed,
2 usage or configuration error, with one clear message naming the bad input.
Heavy modules are imported inside the commands so `orchard --help` is fast.
"""

from __future__ import annotations

import sys

import click

from orchard import __version__
from orchard.errors import UsageError


class _Group(click.Group):
    """Turns `UsageError` from anywhere below into one message and exit 2."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except UsageError as error:
            click.echo(f"orchard: error: {error}", err=True)
            ctx.exit(2)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="orchard")
def cli() -> None:
    """orchard: an optimization research lab for a codebase.

    Agent workers try ranked hypotheses in their own checkouts; every
    candidate is rebuilt from clean and judged by a noise-aware verdict with
    absolute quality gates; wins land as described commits, losers are
    journaled. `orchard bench` and `orchard verdict` work alone as a
    benchmark harness.
    """


@cli.group()
def bench() -> None:
    """Measure binaries: suites and the version-control agent lanes."""


def main() -> None:
    cli(prog_name="orchard")


if __name__ == "__main__":
    sys.exit(main())
