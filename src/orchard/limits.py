"""Limits: the rlimits every sandbox runs under, and which one a run that failed hit.

Workers, judge steps and a lab's measured runs all get `[workers]`'
limits: memory (address space), processes, CPU time and file size, set by
`prlimit` just before bubblewrap, so bwrap and everything under it inherit
them. rlimits count per process (memory, CPU, file size) and per uid
(processes), not per sandbox; `Limits.describe` says so where they are shown.

A run that hits one is told apart so its reason can name it: CPU time and
file size end it with their own signal (SIGXCPU, SIGXFSZ); memory
(RLIMIT_AS: the allocation fails with ENOMEM, no signal) and processes
(fork fails with EAGAIN) leave the failure to the program, so those two are
named from what it printed on stderr, in the words of the usual runtimes and
shells.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from enum import StrEnum

CPU_GRACE_S = 5  # SIGXCPU at the CPU limit, SIGKILL this much later (for a process that ignores SIGXCPU)
SIGXCPU_EXIT = 128 + 24  # how a shell reports a process its CPU limit ended
SIGXFSZ_EXIT = 128 + 25  # how a shell reports a process that wrote past its file-size limit
MIB = 1024 * 1024
OUT_OF_MEMORY = re.compile(r"MemoryError|Cannot allocate memory|bad_alloc|out of memory|memory exhausted|"
                           r"failed to allocate|allocation failed|ENOMEM", re.IGNORECASE)
FILE_TOO_LARGE = re.compile(r"File too large|EFBIG")  # Python ignores SIGXFSZ: its write past the limit fails so
NO_MORE_PROCESSES = re.compile(r"(fork|clone|spawn|thread|process)[^\n]*\n?[^\n]*(Resource temporarily unavailable|"
                               r"EAGAIN)|can'?not fork|can't fork|BlockingIOError", re.IGNORECASE)


class Limit(StrEnum):
    """One of the limits, in the words of a reason ("over its memory limit")."""

    MEMORY = "memory"
    PROCESSES = "process"
    CPU = "CPU time"
    FILE_SIZE = "file-size"


@dataclass(frozen=True)
class Limits:
    """Per-process rlimits for one sandbox; None: not limited."""

    memory_mb: int | None = None  # RLIMIT_AS of each process
    processes: int | None = None  # RLIMIT_NPROC: processes of the sandbox's uid
    cpu_s: int | None = None  # RLIMIT_CPU of each process (SIGXCPU, then SIGKILL)
    file_mb: int | None = None  # RLIMIT_FSIZE: the largest file a process may write (SIGXFSZ)

    def prlimit_args(self) -> list[str]:
        """`prlimit --as=... --` for the limits set; nothing when none is."""
        flags = [f"--as={self.memory_mb * MIB}" if self.memory_mb else "",
                 f"--nproc={self.processes}" if self.processes else "",
                 f"--cpu={self.cpu_s}:{self.cpu_s + CPU_GRACE_S}" if self.cpu_s else "",
                 f"--fsize={self.file_mb * MIB}" if self.file_mb else ""]
        flags = [flag for flag in flags if flag]
        return [shutil.which("prlimit") or "/usr/bin/prlimit", *flags, "--"] if flags else []

    def describe(self) -> str:
        """One line for `orchard status`: the limits and how they are enforced."""
        parts = [f"memory {self.memory_mb} MB per process" if self.memory_mb else "",
                 f"{self.processes} processes" if self.processes else "",
                 f"CPU {self.cpu_s} s per process" if self.cpu_s else "",
                 f"files up to {self.file_mb} MB" if self.file_mb else ""]
        said = ", ".join(part for part in parts if part)
        return f"{said} (rlimits)" if said else "no limits"

    def setting(self, limit: Limit) -> str:
        """The `[workers]` key and value that set `limit` ("" when it is not set)."""
        value = {Limit.MEMORY: ("memory_mb", self.memory_mb), Limit.PROCESSES: ("processes", self.processes),
                 Limit.CPU: ("cpu_seconds", self.cpu_s), Limit.FILE_SIZE: ("file_mb", self.file_mb)}[limit]
        return f"{value[0]} = {value[1]}" if value[1] else ""

    def hit(self, exit_code: int | None, stderr: str = "") -> Limit | None:
        """The limit a failed run hit, among those set: by its signal, else by what it printed; None otherwise."""
        if exit_code in (0, None):
            return None
        words = ((OUT_OF_MEMORY, Limit.MEMORY), (NO_MORE_PROCESSES, Limit.PROCESSES), (FILE_TOO_LARGE, Limit.FILE_SIZE))
        found = _signalled(exit_code) or next((limit for said, limit in words if said.search(stderr)), None)
        return found if found is not None and self.setting(found) else None

    def measured_hint(self, exit_code: int | None, stderr: str) -> str:
        """" (over its memory limit while measured, memory_mb = 128)" for a measured run that hit one, else ""."""
        found = self.hit(exit_code, stderr)
        return "" if found is None else f" (over its {found} limit while measured, {self.setting(found)})"


NO_LIMITS = Limits()


def _signalled(exit_code: int | None) -> Limit | None:
    """The limit whose own signal ended a process (as a shell reports it, or as a negative return code)."""
    return {SIGXCPU_EXIT: Limit.CPU, -24: Limit.CPU, SIGXFSZ_EXIT: Limit.FILE_SIZE, -25: Limit.FILE_SIZE}.get(
        exit_code or 0)


def exit_hint(exit_code: int | None) -> str:
    """What a sandbox's exit code alone says about a limit it hit ("" when nothing)."""
    found = _signalled(exit_code)
    if found is not None:
        return f" (over its {found} limit)"
    if exit_code in (128 + 9, -9):
        return " (SIGKILL: its CPU time limit, or memory)"
    return ""
