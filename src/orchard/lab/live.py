"""What only a running lab shows: who holds the measurement lock and who queues for it, and each worker's log tail.

Read from the machine, not from lab.db, for the live dashboard and `orchard
status`; report.html and FINAL_REPORT.md, written when the lab stops, show
neither.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from orchard.bench.lock import default_lock_path, lock_disabled, read_holder

LOG_TAIL_BYTES = 4096
LOG_TAIL_LINES = 12
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|[\x00-\x08\x0b-\x1f\x7f]")


@dataclass(frozen=True)
class LockView:
    state: str  # free, held, disabled
    path: str
    holder_pid: int | None
    holder_label: str | None
    holder_since: float | None
    queue: tuple[int, ...]  # pids waiting


def read_lock(path: Path | None = None) -> LockView:
    """Who holds the machine-wide measurement lock right now, and who queues for it."""
    path = path or default_lock_path()
    if lock_disabled():
        return LockView("disabled", str(path), None, None, None, ())
    probe = FileLock(path, mode=0o666, thread_local=False, preserve_lock_file=True)
    try:
        probe.acquire(timeout=0)
    except Timeout:
        held = True
    else:
        probe.release()
        held = False
    holder = read_holder(path) or {}
    queue: list[int] = []
    try:
        for ticket in Path(f"{path}.waiting").iterdir():
            pid = ticket.name.split("-", 1)[0]
            if pid.isdigit():
                queue.append(int(pid))
    except OSError:
        pass
    return LockView("held" if held else "free", str(path), holder.get("pid"), holder.get("label"),
                    holder.get("since"), tuple(sorted(set(queue))))


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> tuple[str, ...]:
    """The last lines of a worker's log, with terminal control sequences removed (the log is the worker's)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - LOG_TAIL_BYTES))
            raw = handle.read()
    except OSError:
        return ()
    text = _CONTROL.sub("", raw.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n"))
    return tuple(text.splitlines()[-lines:])
