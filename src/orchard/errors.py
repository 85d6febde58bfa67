"""Errors shared by bench and lab.

`UsageError` is bad input or configuration: the CLI prints its message once
and exits 2. `FixtureError` is a set-up step that failed before anything
could be measured (exit 1). Anything else that escapes is a bug or an
environment failure.
"""


class OrchardError(Exception):
    """Base class for errors orchard reports to the user."""


class UsageError(OrchardError):
    """Bad input: a missing binary, a malformed file, an unknown name (exit 2)."""


class FixtureError(OrchardError):
    """A fixture's or harness's set-up command failed: nothing can be measured."""
