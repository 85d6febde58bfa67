"""Environment allowlists: what a worker or a judge step inherits of the orchestrator's environment.

The orchestrator's environment holds secrets (cloud keys, repository
tokens, every agent's API key) and a worker or a candidate's build runs code
nobody reviewed. So nothing is inherited by default: only an allowlist of
harmless variables, plus the credentials a worker's launcher declares, plus
what orchard.toml names in `pass_env`. Names ending in `*` match a prefix.

`ORCHARD_*` is on the allowlist: orchard's own settings (and the test
suite's `ORCHARD_TEST_MARK`, by which the tests find every process a test
started). Never keep a secret in an `ORCHARD_` variable.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

# What every worker and every judge step may inherit.
BASE = ("PATH", "LANG", "LC_*", "TERM", "TZ", "ORCHARD_*")
# What the judge's steps inherit besides: they run with the orchestrator's own home and temp dir.
JUDGE = ("HOME", "USER", "LOGNAME", "SHELL", "TMPDIR")


def matches(name: str, patterns: Iterable[str]) -> bool:
    """`name` is one of `patterns` (a pattern ending in `*` matches every name it starts)."""
    return any(name.startswith(p[:-1]) if p.endswith("*") else name == p for p in patterns)


def names(patterns: Iterable[str], environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The variables of `environ` (default: this process's) that `patterns` allow, sorted."""
    patterns = tuple(patterns)
    source = os.environ if environ is None else environ
    return tuple(sorted(name for name in source if matches(name, patterns)))


def worker_names(credentials: Iterable[str], pass_env: Iterable[str]) -> tuple[str, ...]:
    """What a worker inherits: the allowlist, its launcher's credentials, its `pass_env`."""
    return names((*BASE, *credentials, *pass_env))


def judge_env(pass_env: Iterable[str]) -> dict[str, str]:
    """The whole environment of a judge step (build, tests, harness tests): allowlist plus `[lab] pass_env`."""
    return {name: os.environ[name] for name in names((*BASE, *JUDGE, *pass_env))}
