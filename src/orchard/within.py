"""Whether one path is inside another, by their parts.

`root in path.parents` builds every parent as a Path; a confined run's sandbox asks this thousands of times (its
mounts, the tools it sees), which made about a third of the ~12 ms its command line took to build.
"""

from __future__ import annotations

from pathlib import Path


def inside(path: Path, root: Path) -> bool:
    """`path` is `root` or under it (`path == root or root in path.parents`)."""
    top = root.parts
    return path.parts[:len(top)] == top and path.anchor == root.anchor


def below(path: Path, root: Path) -> bool:
    """`path` is under `root`, not `root` itself (`root in path.parents`)."""
    return len(path.parts) > len(root.parts) and inside(path, root)
