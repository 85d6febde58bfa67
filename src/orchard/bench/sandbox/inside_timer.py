"""The timer that runs inside a measured run's sandbox: the program's own wall time and CPU, not bubblewrap's.

Run by path as `python -I -S inside_timer.py FD COMMAND...` (standard library
only, no orchard import: its start-up is short, and it is outside the measured
interval anyway). It is the sandbox's PID 1, so what the program starts cannot
signal it. It makes itself non-dumpable before it starts the program, so the
program (same uid) can neither trace it nor open its report file through
/proc; the report file is inherited on `FD` and not passed on. It reads the
clock, starts the program, waits for it, reads the clock again and writes one
line: wall ns, the program's user and system CPU (µs) and peak RSS (KiB) from
its `wait4`, and its own peak RSS (KiB) when it started the program (Linux
carries it into the program at exec: a peak not above it is not the program's):
the peak of its own memory (`VmHWM`), not `getrusage`'s, which carries the
peak of whatever started it (a large Python, unconfined) and would hide the
program's peak below it.
Its exit code is the program's (128 + N when signal N ended it, as a shell
says it; 127 when the program could not be started). `inside_timer.c` is
the same timer in C, used where a C compiler can build it (`own_timing.py`).
"""

from __future__ import annotations

import os
import resource
import sys
import time

PR_SET_DUMPABLE = 4
CANNOT_RUN = 127


def _undumpable() -> None:
    import ctypes  # noqa: PLC0415 (only here: ctypes costs its import on every run otherwise)

    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0)")


def _own_peak_kib() -> int:
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def main(argv: list[str]) -> int:
    report, command = int(argv[0]), argv[1:]
    os.set_inheritable(report, False)
    _undumpable()
    own_rss_kib = _own_peak_kib()
    started = time.perf_counter_ns()
    try:
        pid = os.posix_spawnp(command[0], command, os.environ)
    except OSError as error:
        print(f"{command[0]}: cannot run: {error.strerror}", file=sys.stderr)
        return CANNOT_RUN
    _, status, usage = os.wait4(pid, 0)
    wall_ns = time.perf_counter_ns() - started
    line = (f"{wall_ns} {round(usage.ru_utime * 1e6)} {round(usage.ru_stime * 1e6)} {usage.ru_maxrss} "
            f"{own_rss_kib}\n")
    os.write(report, line.encode())
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
