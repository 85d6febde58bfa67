"""A git checkout's own files, read without starting git: its `.git` directory and its head.

Reading them directly is cheaper than a git process (clones and collections ask often) and runs nothing a
checkout's configuration could plant; anything unclear is left to git itself (`git.py`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def read_head(git_dir: Path) -> str:
    """A checkout's head commit, read from its files, never by running git there ("" if unreadable)."""
    try:
        head = small_text(git_dir / "HEAD")
        for _ in range(5):  # a symbolic ref, followed a few levels at most
            if not head.startswith("ref: "):
                return head if len(head) in (40, 64) and all(c in "0123456789abcdef" for c in head) else ""
            ref = head[5:].strip()
            if ".." in ref or not ref.startswith("refs/"):
                return ""
            loose = git_dir / ref
            if loose.is_file() and not loose.is_symlink():
                head = small_text(loose)
                continue
            packed = small_text(git_dir / "packed-refs") if (git_dir / "packed-refs").is_file() else ""
            found = [line.split(" ", 1)[0] for line in packed.splitlines() if line.endswith(" " + ref)]
            head = found[0] if found else ""
    except (OSError, UnicodeDecodeError):
        return ""
    return ""


def small_text(path: Path, limit: int = 1 << 20) -> str:
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return ""
        return os.read(descriptor, limit).decode("utf-8").strip()
    finally:
        os.close(descriptor)


def own_git_dir(checkout: Path) -> Path | None:
    """A checkout's `.git` when it is a directory of its own (a clone's), read without starting git.

    None for anything else (a linked worktree's `.git` file, a link, a subdirectory): git is asked then.
    """
    git_dir = Path(checkout).absolute() / ".git"
    return git_dir if git_dir.is_dir() and not git_dir.is_symlink() else None
