"""Instruction counts: the metric that survives a busy machine.

Wall and CPU time move with whatever else the machine runs; the number of
instructions a program retires barely does. Where the kernel exposes
hardware counters, `perf stat -e instructions:u` reads them at full speed;
elsewhere (most VMs and containers, this one included) `valgrind
--tool=cachegrind` counts them by simulation, deterministically to a
fraction of a percent and 20 to 100 times slower. Either way the count is
taken in a separate, untimed run of the same command, so the timed run is
never disturbed, and every row says which counter was used.

Instruction counts lie where the work is not instructions: waiting on I/O,
sleeping, syscalls (the kernel's instructions are not counted: only user
space), page faults, lock contention and parallel speed-ups (a program that
does the same work on more threads retires as many instructions, or more,
while finishing sooner). See docs/suites.md.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from orchard.bench import runner

METRIC = "instructions"
ENV_COUNTER = "ORCHARD_INSTRUCTION_COUNTER"  # "perf" or "cachegrind": force one


class Counter(StrEnum):
    PERF = "perf"
    CACHEGRIND = "cachegrind"


@dataclass(frozen=True)
class Count:
    """One untimed counting run: the count (None if it failed) and how it was taken."""

    instructions: int | None
    counter: Counter | None
    failure: str = ""

    def row_fields(self) -> dict[str, object]:
        return {
            METRIC: self.instructions,
            "instructions_counter": None if self.counter is None else str(self.counter),
            **({"instructions_failure": self.failure} if self.failure else {}),
        }


@functools.cache
def _perf_works() -> bool:
    """Whether hardware counters answer here (`<not supported>` in most VMs)."""
    if shutil.which("perf") is None:
        return False
    probe = subprocess.run(
        ["perf", "stat", "-x", ",", "-e", "instructions:u", "true"], capture_output=True, text=True, check=False
    )
    return probe.returncode == 0 and _perf_value(probe.stderr) is not None


def available(forced: str | None = None) -> Counter | None:
    """perf when its counters work, else cachegrind when valgrind is installed, else None."""
    if forced:
        return Counter(forced)
    if _perf_works():
        return Counter.PERF
    return Counter.CACHEGRIND if shutil.which("valgrind") else None


def _perf_value(stderr: str) -> int | None:
    for line in stderr.splitlines():
        parts = line.split(",")
        if len(parts) > 2 and parts[2].startswith("instructions") and parts[0].strip().isdigit():
            return int(parts[0])
    return None


def _cachegrind_total(directory: Path) -> int | None:
    """The sum of every process's `summary:` line (children are traced too)."""
    total, seen = 0, False
    for path in directory.glob("cg.*"):
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("summary:"):
                total += int(line.split()[1])
                seen = True
    return total if seen else None


def count(
    command: Sequence[str] | str,
    *,
    counter: Counter | None,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
) -> Count:
    """Instructions retired in user space by `command` and every process it starts."""
    if counter is None:
        return Count(None, None, "no instruction counter here: install valgrind (or run where perf counters work)")
    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else [str(part) for part in command]
    with tempfile.TemporaryDirectory(prefix="orchard-count-") as scratch:
        if counter is Counter.PERF:
            wrapped = ["perf", "stat", "-x", ",", "-e", "instructions:u", "--", *argv]
        else:
            wrapped = [
                "valgrind",
                "--tool=cachegrind",
                "--cache-sim=no",
                "--trace-children=yes",
                "-q",
                f"--cachegrind-out-file={scratch}/cg.%p",
                "--",
                *argv,
            ]
        # the timeout scales with the counter's slowdown: cachegrind runs a program 20-100x slower
        limit = None if timeout_s is None else timeout_s * (2 if counter is Counter.PERF else 100)
        capture = runner.run(wrapped, cwd=cwd, env=env, timeout_s=limit, admitted_chars=64 * 1024)
        if capture.timed_out:
            return Count(None, counter, f"{counter} run timed out")
        value = _perf_value(capture.stderr_text) if counter is Counter.PERF else _cachegrind_total(Path(scratch))
    if value is None:
        return Count(
            None, counter, f"{counter} gave no count (exit {capture.returncode}): {capture.stderr_text[-200:]}"
        )
    return Count(value, counter)
