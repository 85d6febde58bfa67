"""Remotes a flow publishes to, one fresh remote per measured run.

`--git-remote local`: a bare repository on this disk (the core-equivalent
track: no network in git's loop). `daemon`: the same behind `git daemon` on
127.0.0.1 and a byte-counting proxy (network bytes measured per step).
`github`: the URL in GIT_BENCH_REMOTE (agent-default track); unset means skip
rows. Oak flows publish to an oak server named by OAK_BENCH_SYNC_REPO (and
optionally OAK_REMOTE); unset means skip rows. Rows carry `remote_transport`
and `remote_server`; latency is never compared across unlike transports.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

from orchard import process
from orchard.bench.lanes.transport import LOOPBACK, LoopbackServers, Remote
from orchard.errors import FixtureError

GIT_REMOTE_MODES = ("local", "daemon", "github")
TRANSPORT_LOCAL = "local_file"
TRANSPORT_DAEMON = "git_daemon_loopback"
TRANSPORT_GITHUB = "github"
TRANSPORT_OAK = "oak_server"
GITHUB_ENV = "GIT_BENCH_REMOTE"
OAK_REPO_ENV = "OAK_BENCH_SYNC_REPO"
OAK_REMOTE_ENV = "OAK_REMOTE"
SEED_FILES = {
    "README.md": "Disposable repository for orchard's agent-efficiency lanes.\n",
    "task-notes.md": "# task notes\n",
}
HARNESS_TIMEOUT_S = 120.0


def harness(argv: list[str], cwd: Path, env: Mapping[str, str], timeout_s: float = HARNESS_TIMEOUT_S) -> str:
    """Run an untimed fixture command; its stdout, or FixtureError with its stderr."""
    capture = process.run(argv, cwd=cwd, env=env, timeout_s=timeout_s)
    if not capture.ok:
        detail = f"timed out after {timeout_s:.0f} s" if capture.timed_out else capture.stderr_text.strip()[-300:]
        raise FixtureError(f"`{process.command_display(argv[1:])[:120]}` failed: {detail}")
    return capture.stdout_text


def seed_bare(git: str, bare: Path, env: Mapping[str, str]) -> Path:
    """A bare repository whose `main` has one seed commit with the payload file."""
    bare.parent.mkdir(parents=True, exist_ok=True)
    harness([git, "init", "-q", "--bare", "-b", "main", str(bare)], bare.parent, env)
    push_seed(git, bare.parent / f"{bare.name}.seed", str(bare), env)
    return bare


def push_seed(git: str, seed: Path, url: str, env: Mapping[str, str]) -> None:
    """Commit the seed files in a new repository at `seed` and push them as `main`."""
    seed.mkdir(parents=True)
    for name, text in SEED_FILES.items():
        (seed / name).write_text(text)
    for argv in (
        [git, "init", "-q", "-b", "main"],
        [git, "add", "."],
        [git, "commit", "-q", "-m", "seed"],
        [git, "push", "-q", url, "main:main"],
    ):
        harness(argv, seed, env)


def _seed_shared(git: str, url: str, scratch: Path, env: Mapping[str, str]) -> None:
    """Give an external remote a `main` once; later runs reuse it."""
    if harness([git, "ls-remote", url, "refs/heads/main"], scratch, env).strip():
        return
    push_seed(git, scratch / "shared-seed", url, env)


def git_remote(
    mode: str,
    servers: LoopbackServers,
    root: Path,
    name: str,
    env: Mapping[str, str],
) -> Remote | str:
    """A fresh seeded remote for one run, or the reason it cannot exist here."""
    if mode == "local":
        bare = seed_bare(servers.git, root / "remotes" / f"{name}.git", env)
        return Remote(url=str(bare), transport=TRANSPORT_LOCAL, server=None, bare=bare)
    if mode == "daemon":
        bare = seed_bare(servers.git, servers.served / f"{name}.git", env)
        daemon = servers.daemon()
        proxy = servers.proxy(daemon.port)
        return Remote(
            url=f"git://{LOOPBACK}:{proxy.port}/{name}.git",
            transport=TRANSPORT_DAEMON,
            server=LOOPBACK,
            bare=bare,
            proxy=proxy,
        )
    if mode == "github":
        url = os.environ.get(GITHUB_ENV, "").strip()
        if not url:
            return f"{GITHUB_ENV} is not set: no disposable GitHub remote to push to"
        _seed_shared(servers.git, url, root / f"{name}-scratch", env)
        host = urllib.parse.urlparse(url).hostname or url.split("@")[-1].split(":")[0]
        return Remote(url=url, transport=TRANSPORT_GITHUB, server=host)
    raise ValueError(f"unknown git remote mode {mode!r}")


def oak_remote() -> Remote | str:
    """The oak server and repository named in the environment, or why there is none."""
    repo = os.environ.get(OAK_REPO_ENV, "").strip()
    if not repo:
        return f"{OAK_REPO_ENV} is not set: no disposable oak repository to publish to"
    server = os.environ.get(OAK_REMOTE_ENV, "").strip()
    host = urllib.parse.urlparse(server).hostname if server else None
    return Remote(url=server, transport=TRANSPORT_OAK, server=host or "oak default remote", repo=repo)
