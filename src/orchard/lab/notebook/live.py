"""What only a running lab shows besides the measurement lock (`verdicts.lock_status`): each worker's log tail.

Read from the machine, not from lab.db, for the live dashboard and `orchard
status`; report.html and FINAL_REPORT.md, written when the lab stops, show
neither.
"""

from __future__ import annotations

import re
from pathlib import Path

from orchard.lab.text import CONTROL

LOG_TAIL_BYTES = 65536  # an agent's JSON event can be one long line: enough for a few whole ones
LOG_TAIL_LINES = 12
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|[" + CONTROL + "]")  # colours and cursor moves, then the rest


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> tuple[str, ...]:
    """The last lines of a worker's log, with terminal control sequences removed (the log is the worker's)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - LOG_TAIL_BYTES))
            raw = handle.read()
            if size > LOG_TAIL_BYTES:  # the first line read is a piece of one: leave it out
                raw = raw.partition(b"\n")[2]
    except OSError:
        return ()
    text = _CONTROL.sub("", raw.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n"))
    return tuple(text.splitlines()[-lines:])
