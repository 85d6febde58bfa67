"""Which files a suite's `[suite] holdout` globs name: one matching rule for the suite's check and the judge."""

from __future__ import annotations

import fnmatch
from pathlib import Path


def suite_files(root: Path) -> list[str]:
    """Every file under a suite's directory (outside `.git`), relative to it, sorted."""
    return sorted(path.relative_to(root).as_posix() for path in root.rglob("*")
                  if ".git" not in path.relative_to(root).parts and (path.is_file() or path.is_symlink()))


def holds_back(relative: str, globs: tuple[str, ...]) -> bool:
    """Whether a `[suite] holdout` glob names this file (`*` also crosses `/`; a directory names what is in it)."""
    return any(fnmatch.fnmatchcase(relative, glob.rstrip("/")) or relative.startswith(glob.rstrip("/") + "/")
               for glob in globs)
