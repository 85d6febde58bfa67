"""Where orchard keeps what it works out once per machine (A/A calibrations), each process's compiled timer, and
the list of temporary directories its processes hold (`orchard.scratch`).

`ORCHARD_CACHE_DIR` names the place (a CI cache, a test's own directory);
otherwise it is `$XDG_CACHE_HOME/orchard` (`~/.cache/orchard`).
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "ORCHARD_CACHE_DIR"


def cache_dir(kind: str) -> Path:
    """The directory of one kind of cached thing (not created here)."""
    named = os.environ.get(CACHE_ENV)
    if named:
        return Path(named) / kind
    return Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "orchard" / kind
