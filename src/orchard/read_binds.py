"""Which read-only binds show a sandbox the paths it may read, symlinks included.

bwrap follows a symlink at a bind's destination outside the sandbox's new
root, so a link to an absolute path (a virtualenv's `bin/python`, pointing at
the Python it was made from) cannot be bound onto itself: bwrap stops with
"Can't create file". A path an earlier bind already shows is left alone, and a
link is bound from its target: at the target, and at the link where a hidden
place took the link away.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from orchard.within import inside


def read_binds(readable: Iterable[Path], covered: Sequence[Path]) -> list[tuple[Path, Path]]:
    """(source, destination) of each bind, in order; `covered`: the places hidden by an empty tmpfs."""
    binds: list[tuple[Path, Path]] = []
    for path in (Path(os.path.abspath(p)) for p in readable):
        if any(inside(path, place) and not place.is_symlink() for _, place in binds):
            continue
        if not path.is_symlink():
            binds.append((path, path))
            continue
        target = path.resolve()
        if not any(inside(target, place) for _, place in binds):
            binds.append((target, target))
        if any(inside(path, top) for top in covered):
            binds.append((target, path))
    return binds
