"""Explicit binaries: checked before anything is measured, identified by content.

A measurement names its binary by path, never by a default; the path must
exist and be executable, and rows record the file's sha256 so two runs of
"the same" binary can be told apart when it was rebuilt.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from orchard.errors import UsageError


def check_binary(path: Path | str, role: str) -> Path:
    """The binary as an absolute path; a missing or non-executable one is a UsageError naming it.

    A symlink stays the path it is: a virtualenv's `bin/python` is a link to
    the base interpreter, and run through its target it is outside the venv.
    """
    binary = Path(path).expanduser()
    if not binary.exists():
        raise UsageError(f"{role}: binary {binary} does not exist")
    if not binary.is_file() or not os.access(binary, os.X_OK):
        raise UsageError(f"{role}: binary {binary} is not an executable file")
    return Path(os.path.abspath(binary))


def binary_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
