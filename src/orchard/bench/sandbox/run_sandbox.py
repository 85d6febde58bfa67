"""One sandbox per campaign side, every measured run started fresh inside it: confinement at a fraction of its cost.

A bubblewrap sandbox per run (namespaces, a network namespace, a few dozen
mounts, `setpriv`) cost 5-8 ms of wall time a run on `/bin/true`
(docs/benchmarks.md section 11): for a 1 ms program, ten times the program.
The runs of one side of a campaign see the same things (the same binary,
view and limits), so its sandbox is made once, on its first run, and a small
runner in it (`run_sandbox.c`, root inside, reached only through a socket in
a directory of orchard's own) starts each run in new mount, PID and IPC
namespaces:

- an empty tmpfs again on every scratch place (`/tmp`, `/var/tmp`, `/home`)
  and on every directory the sandbox made writable, a fresh `/proc`;
  `{workdir}` emptied by orchard before the run, as before;
- born in the side's own pids cgroup, which its runner entered once (a
  cgroup v1 migration waits for an RCU grace period: made per run it cost
  10-15 ms of every run of a program running 20 ms or more); runs come one
  at a time and none outlives its PID namespace, so the cgroup's budget is
  the run's own (or RLIMIT_NPROC where no cgroup can be made); the other
  rlimits set for this run alone; the sandbox uid with no groups, no
  capabilities, no_new_privs;
- its PID namespace ends with it (a daemon, a lock or a socket it held go
  too), its IPC namespace too (SysV and POSIX IPC); the network namespace is
  the side's and holds nothing once none of a run's processes is left.

So no run finds what an earlier one left (tests/bench/test_run_sandbox.py
attacks it). Only where runs drop to the sandbox uid (orchard is root: the
hidden places' tmpfs are root's, not writable by the run) and write neither
a results file outside `{workdir}` nor a counter's scratch; other runs, and
any side whose sandbox could not start, keep a sandbox per run. Runs are timed inside, by
the same timer, as before: the runner's work is outside their interval.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import select
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path

from orchard import confine, sandbox_pids, scratch
from orchard.bench.sandbox.own_timing import compiled
from orchard.limits import CPU_GRACE_S, MIB, Limits

SOURCE = Path(__file__).with_name("run_sandbox.c")


@dataclass(frozen=True)
class _Side:
    """One side's running sandbox: its bubblewrap process, the runner's socket and program (its own client)."""

    process: subprocess.Popen[bytes]
    socket: Path
    runner: Path


class Sandboxes:
    """A campaign's sandboxes, one per side (its mounts and limits), each started on its first run; `close` ends
    them."""

    def __init__(self) -> None:
        self._sides: dict[tuple[confine.Mounts, Limits], _Side | None] = {}
        self._seen: dict[Hashable, confine.Mounts] = {}
        self._lock = threading.Lock()
        self._directory: Path | None = None

    def mounts(self, key: Hashable, make: Callable[[], confine.Mounts]) -> confine.Mounts:
        """What a run described by `key` sees, made once per campaign: the same for every run of a side."""
        with self._lock:
            if key not in self._seen:
                self._seen[key] = make()
            return self._seen[key]

    @property
    def started(self) -> int:
        """How many sides' sandboxes are running."""
        return sum(side is not None for side in self._sides.values())

    def argv(self, mounts: confine.Mounts, command: Sequence[str], limits: Limits,
             fds: Sequence[int]) -> list[str] | None:
        """`command` as one run in its side's sandbox, inheriting `fds`; None where it needs a sandbox of its own."""
        if not mounts.drops:
            return None
        key = (dataclasses.replace(mounts, cwd=Path("/")), limits)
        with self._lock:
            if key not in self._sides:
                runner = compiled(SOURCE, "run-sandbox", static=True)  # its client starts once a run
                self._sides[key] = self._start(key[0], limits, runner) if isinstance(runner, Path) else None
            side = self._sides[key]
        if side is None:
            return None
        return [str(side.runner), "ask", str(side.socket), str(mounts.cwd), ",".join(map(str, fds)) or "-", "--",
                *command]

    def _start(self, mounts: confine.Mounts, limits: Limits, runner: Path) -> _Side | None:
        """The side's sandbox with its runner, once it said it is ready; None when it could not start (its runs then
        get a sandbox each, whose failure says why)."""
        if self._directory is None:
            self._directory = scratch.make()  # 0700, orchard's own
        path = self._directory / f"s{len(self._sides)}"
        groups = sandbox_pids.own_directory() if limits.processes else None
        group = sandbox_pids.name_group() if groups else None  # the side's, entered by its runner
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(str(path))
            listener.listen(16)
            ready, said = os.pipe()
            group_fd = os.open(groups, os.O_RDONLY | os.O_DIRECTORY) if groups else -1
            program = os.open(runner, os.O_RDONLY)  # started by its descriptor: no run sees it
            inherited = (listener.fileno(), said, program, *([group_fd] if group_fd >= 0 else []))
            argv = [confine.bwrap() or "bwrap", *mounts.bwrap_args(), "--", f"/proc/self/fd/{program}", "serve",
                    *map(str, (listener.fileno(), said, group_fd, group.name if group else "-",
                               confine.sandbox_id(), confine.sandbox_id())),
                    *_limit_words(limits), *_places(mounts)]
            try:
                process = subprocess.Popen(argv, pass_fds=inherited, stdin=subprocess.DEVNULL,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            finally:
                for fd in (said, program, group_fd):
                    if fd >= 0:
                        os.close(fd)
            with os.fdopen(ready, "rb") as answer:
                if select.select([answer], [], [], confine.PROBE_TIMEOUT_S)[0] and answer.read(1) == b"R":
                    return _Side(process, path, runner)
            _end(process)
        return None

    def close(self) -> None:
        """End every side's sandbox (its runs with it) and remove the sockets' directory."""
        with self._lock:
            for side in self._sides.values():
                if side is not None:
                    _end(side.process)
            self._sides.clear()
            if self._directory is not None:
                scratch.release(self._directory)
                self._directory = None


def _limit_words(limits: Limits) -> list[str]:
    """The runner's AS NPROC CPU_SOFT CPU_HARD FSIZE (0: not set)."""
    cpu = limits.cpu_s or 0
    return [str(n) for n in ((limits.memory_mb or 0) * MIB, limits.processes or 0, cpu,
                             cpu + CPU_GRACE_S if cpu else 0, (limits.file_mb or 0) * MIB)]


def _places(mounts: confine.Mounts) -> list[str]:
    """What each run gets fresh, in order: an empty tmpfs on every scratch place (1777), then the directories the
    sandbox made (`dir`: made again on a fresh place, or given a tmpfs of their own where the run could write
    them)."""
    return [*(word for place in mounts.scratch for word in ("tmpfs", "1777", str(place))),
            *(word for made in mounts.dirs for word in ("dir", str(made)))]


def _end(process: subprocess.Popen[bytes]) -> None:
    """Kill a side's sandbox by its own process group (its runner and any run in it die with it), and reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
