"""`orchard init`: a new workspace from the command line's repositories and an optional orchard.toml.

The command line's repositories win over the file's; a repository that exists
as a local path is recorded absolute, so the workspace works from any
directory later.
"""

from __future__ import annotations

from pathlib import Path

from orchard.errors import UsageError
from orchard.lab.config import orchard_toml as config_module
from orchard.lab.workers.workspace.workspace import Workspace


def _local_or_url(repo: str) -> str:
    """A repository that exists as a local path is recorded as an absolute path."""
    path = Path(repo).expanduser()
    return str(path.resolve()) if path.exists() else repo


def init_workspace(
    directory: Path, target: str, bench: str | None = None, config_file: Path | None = None
) -> Workspace:
    """`orchard init`: a new workspace for `target`, configured from `config_file` if given.

    The command line's repositories win over the file's. Without a bench
    repository, the file's `bench.suite` (relative to the file) is copied into
    the lab's built-in bench.
    """
    data: dict[str, dict[str, object]] = {}
    base_dir = Path.cwd()
    if config_file is not None:
        data = config_module.parse(Path(config_file))
        if not data:
            raise UsageError(f"{config_file}: holds no settings (an empty orchard.toml); nothing was created: give "
                             "the lab's orchard.toml, or leave out --config for the defaults")
        base_dir = Path(config_file).resolve().parent
    data.setdefault("target", {})["repo"] = _local_or_url(target)
    if bench is not None:
        data.setdefault("bench", {})["repo"] = _local_or_url(bench)
    source = str(config_file) if config_file is not None else "orchard init"
    config = config_module.from_dict(data, source=source)
    suite_source = None
    if not config.bench.repo and config.bench.suite:
        suite_source = (base_dir / config.bench.suite).resolve()
        if not suite_source.is_file():
            raise UsageError(f"bench.suite {config.bench.suite!r}: no such file ({suite_source})")
    return Workspace.create(Path(directory), config, suite_source=suite_source)
