"""The host's Unix sockets a sandbox would still see, so that confinement can cover each one.

A read-only mount does not stop a `connect()`, and a pathname socket is
reached through the file system, whatever network namespace the sandbox
has: a socket on a path the sandbox can see (a database's, a container
daemon's, an agent's) is a door out of `network = "none"` or `"api"`.
The places where such sockets usually live (/run, /tmp, /var/tmp, homes)
are hidden already; the rest are found here, from the kernel's own list of
bound sockets (/proc/net/unix), and each gets /dev/null bound over it, so a
connect inside is refused. A socket bound after the sandbox started is not
in that list: the sandbox is made with what is bound when it starts.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

PROC_NET_UNIX = Path("/proc/net/unix")
FIELDS = 8  # Num RefCount Protocol Flags Type St Inode Path
FRESH = (Path("/dev"), Path("/proc"))  # made anew in every sandbox: the host's entries are not there


def bound(table: Path = PROC_NET_UNIX) -> list[Path]:
    """Every pathname socket bound in this network namespace that is a socket on this file system now."""
    try:
        lines = table.read_text(errors="replace").splitlines()[1:]
    except OSError:
        return []
    found: dict[Path, None] = {}
    for line in lines:
        fields = line.split(maxsplit=FIELDS - 1)
        if len(fields) == FIELDS and fields[-1].startswith("/"):  # "@name": abstract, private to the namespace
            found[Path(os.path.realpath(fields[-1]))] = None  # as the sandbox resolves it (/var/run: /run)
    return [path for path in found if _is_socket(path)]


def _is_socket(path: Path) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def _within(path: Path, places: Iterable[Path]) -> Path | None:
    """The innermost of `places` that holds `path`, or None."""
    holding = [place for place in places if place == path or place in path.parents]
    return max(holding, key=lambda place: len(place.parts), default=None)


def visible(sockets: Iterable[Path], covered: Iterable[Path], bound_back: Iterable[Path],
            own: Iterable[Path] = ()) -> list[Path]:
    """The `sockets` a sandbox would see: not under a place `covered` by a tmpfs (nor /dev, /proc), unless a
    place `bound_back` inside it brings it back; never under `own` (the sandbox's own places, e.g. the egress
    proxy's directory)."""
    covered, bound_back, own = [*covered, *FRESH], list(bound_back), list(own)
    seen: list[Path] = []
    for path in sockets:
        if _within(path, own) is not None:
            continue
        hidden, back = _within(path, covered), _within(path, bound_back)
        if hidden is None or (back is not None and len(back.parts) > len(hidden.parts)):
            seen.append(path)
    return seen
