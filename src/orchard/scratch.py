"""Temporary directories a process owns: removed when it is done with them, and by the next one made on the host
if their owner was killed first.

A measurement's workbench and its sandboxes' sockets live in plain `mkdtemp` directories (nothing in their paths
says orchard: a candidate sees them on its command line). `finally` removes them, but a process killed by SIGKILL,
by the OOM killer or with its dask worker runs no `finally`, and nothing would ever remove what it held. So every
such directory is also written down in the cache (`held/`) with its host and its owner's pid and start time; making
a new one first removes those whose owner on this host is gone. A pid alone is not an owner: the start time tells a
reused pid from the process that held the directory. Only a directory right inside this process's temporary
directory, named as its entry says, is ever removed: an entry is a path to delete, so nothing else is taken from one
(an entry for another `TMPDIR` is left to a process that uses it).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from orchard.cache import cache_dir


@dataclass(frozen=True)
class Owner:
    """A process as it was when it started: its pid, and its start time so that a reused pid is not mistaken for
    it."""

    pid: int
    started: float

    @classmethod
    def of(cls, pid: int) -> Owner:
        return cls(pid, psutil.Process(pid).create_time())

    def alive(self) -> bool:
        """False only when it is known gone: a process this user may not look at counts as alive."""
        try:
            return abs(psutil.Process(self.pid).create_time() - self.started) < 0.01
        except psutil.NoSuchProcess:
            return False
        except psutil.AccessDenied:
            return True


@dataclass(frozen=True)
class Held:
    """One directory held by one process, as written down in the cache."""

    path: str
    host: str
    owner: Owner

    @classmethod
    def read(cls, entry: Path) -> Held | None:
        try:
            fields = json.loads(entry.read_text())
            return cls(str(fields["path"]), str(fields["host"]), Owner(int(fields["owner"]["pid"]),
                                                                        float(fields["owner"]["started"])))
        except (OSError, ValueError, KeyError, TypeError):
            return None


def _entries() -> Path:
    return cache_dir("held")


def _entry(path: Path) -> Path:
    return _entries() / f"{socket.gethostname()}-{path.name}.json"


def make(prefix: str = "tmp.") -> Path:
    """A new private directory in the system's temporary directory, held by this process until `release`."""
    with contextlib.suppress(OSError):  # a cache it cannot write costs the list, never the measurement
        sweep()
    path = Path(tempfile.mkdtemp(prefix=prefix))
    held = Held(str(path), socket.gethostname(), Owner.of(os.getpid()))
    writing = _entry(path).with_suffix(".writing")  # whole or absent: a sweep beside it never reads half an entry
    with contextlib.suppress(OSError):
        _entries().mkdir(parents=True, exist_ok=True)
        writing.write_text(json.dumps(asdict(held)))
        writing.replace(_entry(path))
    return path


def release(path: Path, remove: bool = True) -> None:
    """This process is done with `path`: removed (unless kept on purpose) and no longer held."""
    if remove:
        shutil.rmtree(path, ignore_errors=True)
    with contextlib.suppress(OSError):
        _entry(path).unlink(missing_ok=True)


@contextlib.contextmanager
def held_directory(prefix: str = "tmp.") -> Iterator[Path]:
    """A held directory for the length of a `with` block."""
    path = make(prefix)
    try:
        yield path
    finally:
        release(path)


def sweep() -> list[Path]:
    """Remove the directories held on this host by processes that are gone; the ones removed."""
    host, temporary, removed = socket.gethostname(), Path(tempfile.gettempdir()), []
    entries = _entries()
    for entry in sorted(entries.glob("*.json")) if entries.is_dir() else ():
        held = Held.read(entry)
        if held is not None:
            path = Path(held.path)
            if held.host != host or held.owner.alive() or path.parent != temporary:
                continue  # another host's, a live owner's, or another TMPDIR's: left to a process that can tell
            if entry == _entry(path) and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
        entry.unlink(missing_ok=True)
    return removed
