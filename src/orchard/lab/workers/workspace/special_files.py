"""Files a change may not hold: links out of the checkout, FIFOs, sockets, devices, nested repositories.

A symlink that points outside the checkout lands a path into the user's
machine (`/etc/passwd`, `~/.ssh`) as if it were source; a FIFO hangs
whoever reads it; a device or socket is no source at all; a nested
repository (a gitlink) lands a commit id nobody reviewed. Symlinks that
stay inside the checkout are ordinary source and may stay.

The patch is read for what it adds (symlinks and gitlinks are in it by
mode); special files never reach a patch (the VCS skips them silently), so
the worker's tree is walked for them, its VCS directory and ignored paths
left out.
"""

from __future__ import annotations

import os
import posixpath
import stat
from pathlib import Path

from orchard.lab.workers.vcs import Vcs

SYMLINK_MODE = "120000"
GITLINK_MODE = "160000"
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


def _added_mode(headers: list[str]) -> str | None:
    """The mode a patch section leaves its file with (None: unchanged or deleted)."""
    for line in headers:
        for prefix in ("new file mode ", "new mode "):
            if line.startswith(prefix):
                return line[len(prefix):].strip()
        if line.startswith("index ") and len(line.split()) == 3:
            return line.split()[2]
    return None


def outside(path: str, target: str) -> bool:
    """Whether symlink `path` (relative to the checkout) pointing at `target` leaves the checkout."""
    if target.startswith("/") or not target:
        return True
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    return resolved == ".." or resolved.startswith("../")


def in_patch(patch: str) -> list[str]:
    """Symlinks out of the checkout and gitlinks a git patch adds or changes, each with why."""
    found = []
    for section in patch.split("\ndiff --git "):
        section = section.removeprefix("diff --git ")
        lines = section.split("\n")
        header = lines[0]
        path = header.split(" b/", 1)[-1]
        body_at = next((i for i, line in enumerate(lines) if line.startswith("@@")), len(lines))
        mode = _added_mode(lines[1:body_at])
        if mode == GITLINK_MODE:
            found.append(f"{path}: a nested repository (gitlink)")
        elif mode == SYMLINK_MODE:
            added = [line[1:] for line in lines[body_at:] if line.startswith("+") and not line.startswith("+++")]
            target = added[0] if added else ""
            if outside(path, target):
                found.append(f"{path}: a symlink to {target or 'nothing'}, outside the checkout")
    return found


def in_tree(vcs: Vcs, clean: Path, work_tree: Path) -> list[str]:
    """FIFOs, sockets and devices in a foreign work tree that its ignore rules do not leave out."""
    found: dict[str, str] = {}
    for directory, subdirs, names in os.walk(work_tree):
        if Path(directory) == Path(work_tree):
            subdirs[:] = [d for d in subdirs if d not in (".git", f".{vcs.kind}")]
        for name in names + subdirs:
            full = os.path.join(directory, name)
            try:
                mode = os.lstat(full).st_mode
            except OSError:
                continue
            kind = next((what for test, what in _KINDS if test(mode)), None)
            if kind is not None:
                found[os.path.relpath(full, work_tree)] = kind
    ignored = vcs.ignored(clean, work_tree, sorted(found))
    return [f"{path}: {kind}" for path, kind in sorted(found.items()) if path not in ignored]
