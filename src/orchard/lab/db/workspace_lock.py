"""The workspace lock: one `orchard run` per workspace at a time.

Two labs on one workspace would delete each other's baselines, adopt each
other's tmux windows and judge each other's workers. `orchard run` holds an
exclusive kernel lock (`flock`) on `<workspace>/.orchard-run.lock` for as
long as it runs, with its pid written inside so a second run can name it.
The kernel drops the lock when the process ends, however it ends (SIGKILL
included), so a stale lock file never blocks a resume.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from orchard.errors import UsageError

LOCK_NAME = ".orchard-run.lock"


def holder(root: Path) -> int | None:
    """The pid of the `orchard run` holding the workspace's lock, or None when nobody holds it."""
    path = Path(root) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.read(fd, 32).decode("ascii", "replace").strip()
            return int(text) if text.isdigit() else 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


@contextlib.contextmanager
def hold(root: Path) -> Iterator[None]:
    """Hold the workspace's lock, or refuse (exit 2) naming the run that holds it."""
    path = Path(root) / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.read(fd, 32).decode("ascii", "replace").strip()
            who = f"pid {text}" if text.isdigit() else "another process"
            raise UsageError(f"{root}: another `orchard run` ({who}) is running on this workspace; "
                             "wait for it to stop (or stop it) before running again") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
