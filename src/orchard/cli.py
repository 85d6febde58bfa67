"""The command line. Thin: parse, call the library, print, pick the exit code.

Exit codes: 0 success (for `verdict`: not regressed), 1 regressed or failed,
2 usage or configuration error, with one clear message naming the bad input.
Heavy modules are imported inside the commands so `orchard --help` is fast.
"""

from __future__ import annotations

import sys
from pathlib import Path

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


@cli.command()
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--target", "target", required=True, metavar="REPO",
              help="The repository to optimize: a local path or a URL.")
@click.option("--bench", "bench", metavar="REPO",
              help="The harness repository; without it the lab keeps bench.suite in its own bench.")
@click.option("--config", "config_file", type=click.Path(path_type=Path, dir_okay=False),
              help="Start from this orchard.toml (its repositories are replaced by --target/--bench).")
def init(directory: Path, target: str, bench: str | None, config_file: Path | None) -> None:
    """Create a lab workspace in DIRECTORY: layout, orchard.toml, reference clones."""
    from orchard.lab.workspace import init_workspace

    workspace = init_workspace(directory, target, bench, config_file)
    click.echo(f"workspace  {workspace.root}")
    click.echo(f"config     {workspace.config_path}  (edit it, then `orchard run {workspace.root}`)")
    click.echo(f"target     {workspace.config.target.repo} at {workspace.target_base()}")
    bench_source = workspace.config.bench.repo or "built-in bench"
    click.echo(f"bench      {bench_source} at {workspace.bench_base()}")


def main() -> None:
    cli(prog_name="orchard")


if __name__ == "__main__":
    sys.exit(main())
