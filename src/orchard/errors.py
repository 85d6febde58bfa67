"""Errors shared by bench and lab.

`UsageError` is bad input or configuration: the CLI prints its message once
and exits 2. `FixtureError` is a set-up step that failed before anything
could be measured (exit 1). Anything else that escapes is a bug or an
environment failure.
"""

from __future__ import annotations

import errno
import sqlite3


class OrchardError(Exception):
    """Base class for errors orchard reports to the user."""


class UsageError(OrchardError):
    """Bad input: a missing binary, a malformed file, an unknown name (exit 2)."""


class FixtureError(OrchardError):
    """A fixture's or harness's set-up command failed: nothing can be measured."""


def disk_full(error: BaseException) -> bool:
    """Whether `error` says the disk (or the user's quota) is full: an OSError, SQLite's, or a tool's message."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if isinstance(error, sqlite3.Error) and getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
        return True
    text = str(error)  # git says "Out of diskspace" when it cannot write its index
    return any(words in text for words in ("No space left on device", "database or disk is full", "Out of diskspace"))
