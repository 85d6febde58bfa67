"""The disk a worker's directory takes, and whether it is over `[workers] max_checkout_mb`.

Measured wherever the worker runs: the lab's loop checks its local workers
(`loop/disk_limits.py`), a dask host checks the worker it runs
(`remote.py`). Either way a worker over the cap is stopped and its
experiment KILLed with the reason given here.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

MB = 1024 * 1024
CHECK_EVERY_S = 5.0  # how often a running worker's directory is measured


def used_mb(root: Path) -> float:
    """The disk a directory tree takes: each file's allocated blocks, each inode once, symlinks not followed."""
    seen: set[tuple[int, int]] = set()
    total = 0
    pending = [root]
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:
            continue  # vanished or unreadable: what cannot be listed cannot be counted
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                pending.append(Path(entry.path))
            if (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
    return total / MB


def over_cap(root: Path, cap_mb: int) -> str | None:
    """Why the worker whose directory is `root` must stop (over `cap_mb`), as its experiment's reason; None within."""
    used = used_mb(root)
    if used <= cap_mb:
        return None
    return f"its worker's checkout holds {used:,.0f} MB, over [workers] max_checkout_mb ({cap_mb:,} MB)"
