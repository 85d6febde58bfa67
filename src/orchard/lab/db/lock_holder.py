"""Who holds lab.db's write lock: the process a "database is locked" message names.

SQLite locks with POSIX record locks on the database file and, under WAL,
on its `-shm` file; the kernel lists every such lock with the pid that holds
it in /proc/locks. The process that waited is never the answer (it holds
read locks of its own), so a message names the one that blocked it: an
`orchard run`, a `sqlite3` shell left in a transaction, a backup tool.
"""

from __future__ import annotations

import os
from pathlib import Path

PROC_LOCKS = Path("/proc/locks")
COMMAND_CHARS = 240


def _inodes(database: Path) -> set[tuple[int, int]]:
    """(device, inode) of the database and its WAL index, as far as they exist."""
    found = set()
    for path in (database, Path(f"{database}-shm"), Path(f"{database}-wal")):
        try:
            stat = path.stat()
        except OSError:
            continue
        found.add((stat.st_dev, stat.st_ino))
    return found


def _lock_line(line: str) -> tuple[int, int, int] | None:
    """(pid, device, inode) of one /proc/locks line of a POSIX or OFD lock, or None."""
    fields = line.split()
    if "->" in fields:  # a waiter, listed under the lock it waits for
        return None
    if len(fields) < 6 or fields[1] not in ("POSIX", "OFDLCK") or not fields[4].lstrip("-").isdigit():
        return None
    device, _, inode = fields[5].rpartition(":")
    major, _, minor = device.partition(":")
    try:
        return int(fields[4]), os.makedev(int(major, 16), int(minor, 16)), int(inode)
    except ValueError:
        return None


def holders(database: Path) -> list[int]:
    """The pids (other than this process) holding a lock on `database` or its WAL files; empty when unknown."""
    inodes = _inodes(database)
    try:
        lines = PROC_LOCKS.read_text().splitlines()
    except OSError:
        return []
    pids = []
    for line in lines:
        lock = _lock_line(line)
        if lock is not None and (lock[1], lock[2]) in inodes and lock[0] not in (os.getpid(), -1, 0):
            pids.append(lock[0])
    return sorted(set(pids))


def describe(pid: int) -> str:
    """`pid N (its command line)`, clipped; the command is left out when it cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return f"pid {pid}"
    command = " ".join(raw.decode("utf-8", "replace").replace("\0", " ").split())
    command = "".join(c if c.isprintable() else "?" for c in command)
    return f"pid {pid} ({command[:COMMAND_CHARS]})" if command else f"pid {pid}"
