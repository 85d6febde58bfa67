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

`estimated_cycles` (opt-in, `measure = ["estimated_cycles"]`) adds
cachegrind's cache simulation (`--cache-sim=yes`: I1, D1 and last-level
misses) to the same untimed run and weighs the simulated accesses as
Itamar Turner-Trauring's formula does (used by iai and its successors):
`L1 hits + 5 x LL hits + 35 x RAM accesses`, where L1 hits are all accesses
(Ir + Dr + Dw) minus L1 misses (I1mr + D1mr + D1mw), LL hits are L1 misses
minus LL misses (ILmr + DLmr + DLmw), and RAM accesses are LL misses. It is
a model, not a measurement: the simulated caches take their sizes from this
CPU, see only this program (no other process evicts its lines), and know
nothing of branch prediction, pipelines or out-of-order execution. It always
needs cachegrind (perf's real cycle counter moves with the machine's load).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from orchard import process

METRIC = "instructions"
CYCLES = "estimated_cycles"
CYCLES_FORMULA = "L1 hits + 5 x LL hits + 35 x RAM accesses (cachegrind --cache-sim=yes)"
_CACHE_EVENTS = ("Ir", "I1mr", "ILmr", "Dr", "D1mr", "DLmr", "Dw", "D1mw", "DLmw")
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
    estimated_cycles: int | None = None  # only when the cache simulation was asked for
    elapsed_ms: float | None = None  # what the counting run cost, sandbox included (None: nothing ran)

    def row_fields(self) -> dict[str, object]:
        return {
            METRIC: self.instructions,
            "instructions_counter": None if self.counter is None else str(self.counter),
            **({"instructions_count_ms": round(self.elapsed_ms, 3)} if self.elapsed_ms is not None else {}),
            **({"instructions_failure": self.failure} if self.failure else {}),
            **({CYCLES: self.estimated_cycles, "estimated_cycles_formula": CYCLES_FORMULA}
               if self.estimated_cycles is not None else {}),
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


def _cachegrind_events(directory: Path) -> dict[str, int] | None:
    """Every event of the `summary:` lines, summed over every process (children are traced too)."""
    totals: dict[str, int] = {}
    seen = False
    for path in directory.glob("cg.*"):
        names: list[str] = []
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("events:"):
                names = line.split()[1:]
            elif line.startswith("summary:"):
                for name, value in zip(names, line.split()[1:], strict=False):
                    totals[name] = totals.get(name, 0) + int(value)
                seen = True
    return totals if seen else None


def estimated_cycles(events: dict[str, int]) -> int | None:
    """Turner-Trauring's weighting of cachegrind's simulated accesses (None without the cache simulation)."""
    if any(name not in events for name in _CACHE_EVENTS):
        return None
    accesses = events["Ir"] + events["Dr"] + events["Dw"]
    l1_misses = events["I1mr"] + events["D1mr"] + events["D1mw"]
    ll_misses = events["ILmr"] + events["DLmr"] + events["DLmw"]
    return (accesses - l1_misses) + 5 * (l1_misses - ll_misses) + 35 * ll_misses


def _counted(counter: Counter, argv: list[str], scratch: Path, *, cycles: bool) -> list[str]:
    """`argv` under the counter: perf's user-space instructions, or cachegrind writing one file a process."""
    if counter is Counter.PERF:
        return ["perf", "stat", "-x", ",", "-e", "instructions:u", "--", *argv]
    return ["valgrind", "--tool=cachegrind", f"--cache-sim={'yes' if cycles else 'no'}", "--trace-children=yes", "-q",
            f"--cachegrind-out-file={scratch}/cg.%p", "--", *argv]


def count(
    command: Sequence[str] | str,
    *,
    counter: Counter | None,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
    cycles: bool = False,
    confine: Callable[[list[str], Path], list[str]] = lambda argv, _scratch: argv,
) -> Count:
    """Instructions retired in user space by `command` and every process it starts.

    With `cycles`, cachegrind also simulates the caches (whatever `counter`
    says: perf cannot estimate) and the count carries `estimated_cycles`.
    `confine` puts the counter's command line (counter and program) in the
    run's sandbox, which must be able to write the counter's scratch directory.
    """
    if cycles:
        if shutil.which("valgrind") is None:
            return Count(None, None, "estimated_cycles needs cachegrind: install valgrind")
        counter = Counter.CACHEGRIND
    if counter is None:
        return Count(None, None, "no instruction counter here: install valgrind (or run where perf counters work)")
    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else [str(part) for part in command]
    with tempfile.TemporaryDirectory(prefix="orchard-count-") as scratch:
        wrapped = _counted(counter, argv, Path(scratch), cycles=cycles)
        # the timeout scales with the counter's slowdown: cachegrind runs a program 20-100x slower
        limit = None if timeout_s is None else timeout_s * (2 if counter is Counter.PERF else 100)
        started = time.monotonic()
        capture = process.run(confine(wrapped, Path(scratch)), cwd=cwd, env=env, timeout_s=limit,
                              admitted_chars=64 * 1024)
        elapsed_ms = (time.monotonic() - started) * 1000.0
        if capture.timed_out:
            return Count(None, counter, f"{counter} run timed out", elapsed_ms=elapsed_ms)
        events = None if counter is Counter.PERF else _cachegrind_events(Path(scratch))
        value = _perf_value(capture.stderr_text) if counter is Counter.PERF else (events or {}).get("Ir")
    if value is None:
        return Count(None, counter, f"{counter} gave no count (exit {capture.returncode}): "
                     f"{capture.stderr_text[-200:]}", elapsed_ms=elapsed_ms)
    return Count(value, counter, estimated_cycles=estimated_cycles(events or {}) if cycles else None,
                 elapsed_ms=elapsed_ms)
