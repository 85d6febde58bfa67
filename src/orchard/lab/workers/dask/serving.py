"""Serving the lab's repositories read-only to workers on other machines.

A dask worker makes its checkouts from the lab's own reference clones (the
target clone in `judge/target` and the bench clone in `bench/`), exactly
the commits a local worker would get. Two ways to reach them:

- `git-daemon` (default): `git daemon` on the lab host, listening on one
  address (loopback unless `[workers] serve_host` says otherwise), exporting
  exactly these two repositories (`--strict-paths`, nothing else under the
  workspace) with upload-pack only: a worker can clone and fetch, never
  push. It needs nothing shared between machines but a TCP port, and the
  daemon is one process of the lab's, stopped by its pid when the lab stops.
- `path`: the repositories' paths as they are, for clusters whose workers
  see the lab host's filesystem (NFS and the like) under the same paths.

Only git repositories can be served by `git daemon`; other VCSs need `path`.
"""

from __future__ import annotations

import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from orchard.errors import OrchardError, UsageError
from orchard.lab.config.sections import SERVE_MODES
from orchard.lab.workers.jobs.process_tree import kill_tree

GIT_DAEMON, SHARED_PATH = SERVE_MODES
STARTUP_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class ServedRepositories:
    """Where a remote worker clones the lab's target and bench from."""

    target: str
    bench: str


def _git_dir(repository: Path) -> Path:
    out = subprocess.run(["git", "rev-parse", "--absolute-git-dir"], cwd=repository, capture_output=True,
                         text=True, check=False)
    if out.returncode != 0:
        raise UsageError(f"{repository}: not a git repository; `git daemon` can only serve git "
                         "(use [workers] serve = \"path\" on a shared filesystem)")
    return Path(out.stdout.strip())


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class RepositoryServer:
    """Serves a lab's target and bench read-only while the lab runs (a context manager)."""

    def __init__(self, mode: str, root: Path, target: Path, bench: Path, host: str = "127.0.0.1") -> None:
        self.mode = mode
        self.root = Path(root).resolve()
        self.target = Path(target).resolve()
        self.bench = Path(bench).resolve()
        self.host = host
        self.process: subprocess.Popen[bytes] | None = None
        self.repositories: ServedRepositories | None = None

    def start(self) -> ServedRepositories:
        if self.mode == SHARED_PATH:
            self.repositories = ServedRepositories(str(self.target), str(self.bench))
            return self.repositories
        target_git, bench_git = _git_dir(self.target), _git_dir(self.bench)
        port = _free_port(self.host)
        self.process = subprocess.Popen(
            ["git", "daemon", f"--listen={self.host}", f"--port={port}", "--reuseaddr", "--export-all",
             "--strict-paths", f"--base-path={self.root}", str(target_git), str(bench_git)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_listening(port)
        url = f"git://{self.host}:{port}"
        self.repositories = ServedRepositories(f"{url}/{target_git.relative_to(self.root)}",
                                               f"{url}/{bench_git.relative_to(self.root)}")
        return self.repositories

    def _wait_listening(self, port: int) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        assert self.process is not None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise OrchardError(f"git daemon on {self.host}:{port} ended at once (exit {self.process.returncode})")
            try:
                with socket.create_connection((self.host, port), timeout=1.0):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise OrchardError(f"git daemon on {self.host}:{port} did not listen within {STARTUP_TIMEOUT_S:g} s")

    def stop(self) -> None:
        """Stop the daemon and every connection process it forked, by pid."""
        if self.process is None:
            return
        kill_tree(self.process.pid, include_root=True)
        self.process.wait()
        self.process = None

    def __enter__(self) -> ServedRepositories:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
