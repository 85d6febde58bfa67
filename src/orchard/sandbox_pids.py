"""A process budget of its own for every sandbox: a pids cgroup where one can be made, else the uid's rlimit.

RLIMIT_NPROC counts the processes of a uid, and when orchard is root every
sandbox runs as the same one (`confine.sandbox_id`): a worker holding all
but two of `[workers] processes` would make another worker's judge build
fail, in this lab or in another lab on the machine. So where orchard is root
and a pids cgroup hierarchy is mounted writable (cgroup v1's `pids`), each
sandbox starts in a cgroup of its own whose `pids.max` is that budget, and
no RLIMIT_NPROC is set. The cgroup is made by the sandbox's own first words
(`enter`), just before it starts: where it cannot be made there (a dask
host without the hierarchy), the sandbox runs under the rlimit instead.

The cgroups live under one directory per orchard process
(`orchard-<pid>-<token>`): the empty ones are removed from time to time
(rmdir fails on one that still holds a process) and when orchard exits;
those of an orchard that was killed, by the next one.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import os
import secrets
import threading
import time
from pathlib import Path

HIERARCHIES = (Path("/sys/fs/cgroup/pids"),)
SWEEP_EVERY = 64  # cgroups named between two sweeps of the empty ones
EXIT_TRIES, EXIT_PAUSE_S = 20, 0.05
SWEEP_AGE_S = 600.0  # a cgroup named this long ago and empty is done (younger: its sandbox may not have started)
# $0: the cgroup, $1: its pids.max; then the rlimit's three words (`prlimit --nproc=N --`), then the sandbox
ENTER = ('g=$0; if mkdir -p "$g" 2>/dev/null && { echo "$1" > "$g/pids.max" && echo $$ > "$g/cgroup.procs"; } '
         '2>/dev/null; then shift 4; else echo "orchard: no pids cgroup of its own at $g: the sandbox uid'"'"'s '
         'RLIMIT_NPROC of $1, which every sandbox shares, applies" >&2; shift; fi; exec "$@"')

_COUNTER = itertools.count(1)
_NAMED: dict[Path, float] = {}  # cgroups named by this process, with when
_LOCK = threading.Lock()


@functools.cache
def own_directory() -> Path | None:
    """This process's directory in a writable pids hierarchy (made on first use, removed at exit), or None."""
    if os.geteuid() != 0:
        return None
    for top in HIERARCHIES:
        hierarchy = top / _own_cgroup()  # under orchard's own: a sandbox never escapes a limit orchard runs under
        if not (hierarchy / "cgroup.procs").exists() or not os.access(hierarchy, os.W_OK):
            continue
        _remove_stale(hierarchy)
        mine = hierarchy / f"orchard-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            mine.mkdir()
        except OSError:
            continue
        atexit.register(_remove_all, mine)
        return mine
    return None


def _own_cgroup() -> str:
    """Orchard's own place in the v1 pids hierarchy ("" at its top), from /proc/self/cgroup."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return ""
    fields = [line.split(":", 2) for line in lines if line.count(":") >= 2]
    found = [path for _, controllers, path in fields if "pids" in controllers.split(",")]
    return found[0].lstrip("/") if found else ""


def enter(processes: int, rlimit: list[str]) -> list[str]:
    """The words that start a sandbox in a new pids cgroup of `processes` at most, falling back to `rlimit` (the
    `prlimit --nproc=N --` words) where the cgroup cannot be made; `rlimit` alone without a hierarchy here."""
    group = name_group()
    if group is None:
        return rlimit
    return ["/bin/sh", "-c", ENTER, str(group), str(processes), *rlimit]


def name_group() -> Path | None:
    """A new cgroup's path for one sandbox, in this process's directory (made by whoever starts the sandbox, swept
    with the others once empty); None where no pids hierarchy can be written."""
    mine = own_directory()
    if mine is None:
        return None
    with _LOCK:
        number = next(_COUNTER)
        group = mine / f"s{number}"
        _NAMED[group] = time.monotonic()
        if number % SWEEP_EVERY == 0:
            _sweep(time.monotonic() - SWEEP_AGE_S)
    return group


def _sweep(before: float) -> None:
    """Remove the cgroups named before `before` whose processes are all gone."""
    for group, named in list(_NAMED.items()):
        if named < before:
            try:
                group.rmdir()
            except FileNotFoundError:
                pass  # its sandbox never started
            except OSError:
                continue  # still running
            del _NAMED[group]


def _remove_all(mine: Path) -> None:
    """At exit: every cgroup of this process's, tried again for a moment (the kernel lets a cgroup go shortly
    after its last process was reaped, not at once); what still runs (it dies with orchard) is left behind, for
    the next orchard to remove (`_remove_stale`)."""
    for _ in range(EXIT_TRIES):
        _sweep(float("inf"))
        try:
            mine.rmdir()
            return
        except OSError:
            time.sleep(EXIT_PAUSE_S)


def _remove_stale(hierarchy: Path) -> None:
    """The directories of orchard processes that are gone (killed before their exit could remove them), and the
    cgroups in them no process holds any more."""
    for stale in hierarchy.glob("orchard-*-*"):
        pid = stale.name.split("-")[1]
        if not pid.isdigit() or Path("/proc", pid).exists():
            continue
        for group in stale.glob("s*"):
            with contextlib.suppress(OSError):
                group.rmdir()
        with contextlib.suppress(OSError):
            stale.rmdir()
