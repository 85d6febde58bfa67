"""What machine a measurement was taken on.

The fingerprint is a comparability key: A/A calibrations are cached per
fingerprint, and the verdict refuses to compare rows taken on different
machines. It covers what changes timings (CPU model, core count, memory,
kernel, Python, the CPU frequency governor where the kernel shows it) and
nothing that only names the machine: an ephemeral CI runner gets a new
hostname every time, on the same hardware, and must reuse a calibration.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

GOVERNOR = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _memory_gib() -> int | None:
    """Rounded: the kernel's usable total moves by a few MiB between boots of one machine."""
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)
    except (ValueError, OSError, AttributeError):
        return None


def _governor() -> str | None:
    try:
        return GOVERNOR.read_text().strip() or None
    except OSError:
        return None  # not visible here (VMs, containers): not part of the fingerprint then


@dataclass(frozen=True)
class MachineFacts:
    """The facts that change numbers; hashed into the fingerprint."""

    system: str
    kernel: str
    arch: str
    cpu_model: str
    cpu_count: int | None
    memory_gib: int | None
    python: str
    governor: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MachineFacts:
        return cls(**{f.name: data.get(f.name) for f in fields(cls)})  # type: ignore[arg-type]

    def describe(self) -> str:
        """One line for a benchmark report."""
        memory = "unknown memory" if self.memory_gib is None else f"{self.memory_gib} GiB"
        governor = "" if self.governor is None else f", governor {self.governor}"
        return (f"{self.cpu_model}, {self.cpu_count} cores, {memory}, {self.system} {self.kernel}, "
                f"Python {self.python}{governor}")

    def fingerprint(self) -> str:
        blob = json.dumps(self.to_dict(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def differences(self, other: MachineFacts) -> list[str]:
        """`name: mine here, theirs there` for every fact that differs."""
        mine, theirs = self.to_dict(), other.to_dict()
        return [f"{key}: {mine[key]!r} here, {theirs[key]!r} there" for key in mine if mine[key] != theirs[key]]


@functools.cache
def machine_facts() -> MachineFacts:
    """Facts recorded with every calibration (and hashed into the fingerprint)."""
    return MachineFacts(
        system=platform.system(),
        kernel=platform.release(),
        arch=platform.machine(),
        cpu_model=_cpu_model(),
        cpu_count=os.cpu_count(),
        memory_gib=_memory_gib(),
        python=platform.python_version(),
        governor=_governor(),
    )


@functools.cache
def machine_fingerprint() -> str:
    """A short stable id of this machine's measurement-relevant facts."""
    return machine_facts().fingerprint()
