"""What machine a measurement was taken on.

The fingerprint is a comparability key: A/A calibrations are cached per
fingerprint, and the verdict refuses to compare rows taken on different
machines. It covers what changes timings (CPU model, core count, memory,
kernel, Python) and nothing that changes between reboots.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
from pathlib import Path
from typing import Any


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


@functools.cache
def machine_facts() -> dict[str, Any]:
    """Facts recorded with every run (and hashed into the fingerprint)."""
    return {
        "hostname": platform.node(),
        "system": platform.system(),
        "kernel": platform.release(),
        "arch": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": _memory_bytes(),
        "python": platform.python_version(),
    }


@functools.cache
def machine_fingerprint() -> str:
    """A short stable id of this machine's measurement-relevant facts."""
    blob = json.dumps(machine_facts(), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
