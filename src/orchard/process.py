"""Run one command as its own process group and measure it; the command as a user would type it.

Shared by the bench (every measured step) and the lab (builds, steps, the
version-control CLIs): running a process is neither's concept.

The child gets its own process group so a timeout (or a stray grandchild
left behind after it exits) is killed as a whole, by group id, never by name.
Resource usage comes from `wait4`, which on Linux reports the child together
with the descendants it waited for: peak RSS and CPU of the process tree.
Linux carries the launcher's own peak RSS into the child at exec, so a child
that never grows past orchard's own footprint has no measurable peak: that is
recorded as null (unmeasured), never as orchard's number.
Output is read as bytes; everything is counted and stdout is hashed whole,
but only the first `admitted_chars` bytes per stream are kept, as an agent
would see them. A caller that must read all of stdout (gates searching for
facts) passes a `stdout_sink` that receives every chunk.
"""

from __future__ import annotations

import hashlib
import os
import resource
import selectors
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, cast

DEFAULT_ADMITTED_CHARS = 20_000
# After the child exits, how long stragglers holding its pipes may keep
# writing before the group is killed.
DRAIN_GRACE_S = 0.2


@dataclass(frozen=True)
class Capture:
    """What one run of one command did."""

    command: list[str] | str
    returncode: int | None  # None when it was killed by the timeout
    timed_out: bool
    elapsed_ms: float
    cpu_ms: float | None
    peak_rss_bytes: int | None
    stdout: bytes  # admitted part only
    stderr: bytes
    stdout_bytes: int  # everything the stream carried
    stdout_sha256: str  # of everything stdout carried, not only the admitted part
    stderr_bytes: int
    started_at: str
    ended_at: str
    # monotonic bounds, to check that measured intervals never overlap
    started_ns: int
    ended_ns: int

    @property
    def stdout_truncated(self) -> bool:
        return self.stdout_bytes > len(self.stdout)

    @property
    def stderr_truncated(self) -> bool:
        return self.stderr_bytes > len(self.stderr)

    @property
    def stdout_text(self) -> str:
        return self.stdout.decode("utf-8", errors="replace")

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", errors="replace")

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.returncode == 0


class _Stream:
    def __init__(self, admitted: int, sink: IO[bytes] | None = None) -> None:
        self.admitted = admitted
        self.kept = bytearray()
        self.total = 0
        self.hash = hashlib.sha256()
        self.sink = sink

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.hash.update(chunk)
        if self.sink is not None:
            self.sink.write(chunk)
        room = self.admitted - len(self.kept)
        if room > 0:
            self.kept += chunk[:room]


class _Feed:
    """The stdin bytes not yet written to the child."""

    def __init__(self, data: bytes) -> None:
        self.rest = memoryview(data)

    def write(self, fd: int) -> bool:
        """Write what the pipe takes now; True when done (all written, or the reader is gone)."""
        try:
            written = os.write(fd, self.rest[:65536]) if self.rest else 0
        except BrokenPipeError:
            return True
        except BlockingIOError:
            return False
        self.rest = self.rest[written:]
        return not self.rest


def command_display(command: Sequence[str] | str) -> str:
    """The command as a user (or an agent) would type it."""
    if isinstance(command, str):
        return command
    return shlex.join(str(part) for part in command)


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def kill_group(pgid: int) -> None:
    """SIGKILL a whole process group; a group that is already gone is fine."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _HeldInterrupt:
    """Ctrl-C while the child is being started is held until the runner knows the child's process group.

    A KeyboardInterrupt raised inside `Popen` (after the fork, before it returns) would leave the group
    the command started running with nobody to kill it. Only the main thread gets SIGINT, so only there
    is there anything to hold; a handler other than Python's default is left alone.
    """

    def __init__(self) -> None:
        self.pending = False
        self.previous: Any = None

    def __enter__(self) -> _HeldInterrupt:
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self.previous = signal.signal(signal.SIGINT, self._hold)
        return self

    def _hold(self, signum: int, frame: object) -> None:
        self.pending = True

    def __exit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        """SIGINT's handler back, and the held Ctrl-C raised: called where the caller can kill the group, since a
        Ctrl-C right after the handler is back raises at once."""
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
            self.previous = None
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt


def run(
    command: Sequence[str] | str,
    *,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
    admitted_chars: int = DEFAULT_ADMITTED_CHARS,
    stdin: bytes | None = None,
    stdout_sink: IO[bytes] | None = None,
    pass_fds: Sequence[int] = (),
) -> Capture:
    """Run `command` (an argv list; a string runs through /bin/sh) and measure it; it inherits `pass_fds`."""
    argv: list[str] | str = command if isinstance(command, str) else [str(part) for part in command]
    launcher_rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started_at = _now_iso()
    started_ns = time.perf_counter_ns()
    out, err = _Stream(admitted_chars, stdout_sink), _Stream(admitted_chars)
    with _HeldInterrupt() as held:  # from before the child starts until the runner can kill its group
        proc = _spawn(argv, cwd, env, stdin is not None, pass_fds)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            held.release()
            ended = _pump(proc, out, err, stdin, deadline)
        except BaseException:
            kill_group(proc.pid)
            proc.wait()
            raise
        finally:
            ended_ns = time.perf_counter_ns()
            kill_group(proc.pid)  # nothing the command started outlives the measurement
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
    returncode = None if ended.timed_out else os.waitstatus_to_exitcode(ended.status)
    proc.returncode = returncode if returncode is not None else -signal.SIGKILL
    cpu_ms, peak_rss = _usage(ended, launcher_rss_kib)
    return Capture(
        command=argv, returncode=returncode, timed_out=ended.timed_out, elapsed_ms=(ended_ns - started_ns) / 1e6,
        cpu_ms=cpu_ms, peak_rss_bytes=peak_rss, stdout=bytes(out.kept), stderr=bytes(err.kept),
        stdout_bytes=out.total, stdout_sha256=out.hash.hexdigest(), stderr_bytes=err.total,
        started_at=started_at, ended_at=_now_iso(), started_ns=started_ns, ended_ns=ended_ns,
    )


def _spawn(argv: list[str] | str, cwd: Path | str | None, env: Mapping[str, str] | None, feed: bool,
           pass_fds: Sequence[int]) -> subprocess.Popen[bytes]:
    """The child started in a session (and process group) of its own, both pipes read by the runner and stdin fed
    only when there is something to `feed`."""
    return subprocess.Popen(
        argv,
        shell=isinstance(argv, str),
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.PIPE if feed else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        pass_fds=tuple(pass_fds),
    )


def _usage(ended: _Ended, launcher_rss_kib: int) -> tuple[float | None, int | None]:
    """The child's CPU time (ms) and peak RSS (bytes; None when no higher than the runner's own, which a forked
    child's maximum starts from)."""
    if ended.rusage is None:
        return None, None
    cpu_ms = (ended.rusage.ru_utime + ended.rusage.ru_stime) * 1000.0
    peak_rss = ended.rusage.ru_maxrss * 1024 if ended.rusage.ru_maxrss > launcher_rss_kib else None  # Linux: KiB
    return cpu_ms, peak_rss


@dataclass
class _Ended:
    """How the child ended, as `_pump` saw it (no status yet while it runs)."""

    status: int = 0
    rusage: resource.struct_rusage | None = None
    reaped: bool = False
    timed_out: bool = False


def _pump(proc: subprocess.Popen[bytes], out: _Stream, err: _Stream, stdin: bytes | None,
          deadline: float | None) -> _Ended:
    """Feed the child's stdin, read both its pipes and reap it, killing its group at the deadline.

    Pipes still held open by what it started get DRAIN_GRACE_S after it exits.
    """
    ended = _Ended()
    pidfd = os.pidfd_open(proc.pid)
    selector = selectors.DefaultSelector()
    try:
        assert proc.stdout is not None and proc.stderr is not None
        selector.register(proc.stdout, selectors.EVENT_READ, out)
        selector.register(proc.stderr, selectors.EVENT_READ, err)
        selector.register(pidfd, selectors.EVENT_READ, None)
        if proc.stdin is not None:
            # fed as the child reads it: a child that never reads (or writes
            # more than a pipe holds before reading) cannot block the runner
            os.set_blocking(proc.stdin.fileno(), False)
            selector.register(proc.stdin, selectors.EVENT_WRITE, _Feed(stdin or b""))
        exited_at: float | None = None
        while len(selector.get_map()) > 0:
            now = time.monotonic()
            if exited_at is not None and now - exited_at > DRAIN_GRACE_S:
                break  # stragglers hold the pipes open; the group is killed by `run`
            if not ended.reaped and deadline is not None and now >= deadline:
                ended.timed_out = True
                kill_group(proc.pid)
                deadline = None
            wait = None if deadline is None else max(0.0, deadline - now)
            for key, _ in selector.select(DRAIN_GRACE_S if exited_at is not None else wait):
                if _serve(selector, key, proc, ended):
                    exited_at = time.monotonic()
        if not ended.reaped:
            _, ended.status, ended.rusage = os.wait4(proc.pid, 0)
    finally:
        selector.close()
        os.close(pidfd)
    return ended


def _serve(selector: selectors.BaseSelector, key: selectors.SelectorKey, proc: subprocess.Popen[bytes],
           ended: _Ended) -> bool:
    """One ready file served: stdin fed, output read, or (True) the child reaped through its pidfd."""
    if isinstance(key.data, _Feed):
        if key.data.write(key.fd):
            selector.unregister(key.fileobj)
            cast(IO[bytes], key.fileobj).close()
        return False
    if key.data is None:
        _, ended.status, ended.rusage = os.wait4(proc.pid, 0)
        ended.reaped = True
        selector.unregister(key.fileobj)
        return True
    chunk = os.read(key.fd, 65536)
    if chunk:
        key.data.feed(chunk)
    else:
        selector.unregister(key.fileobj)
    return False
