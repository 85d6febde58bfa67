"""The lab's own packages, which a light install (`pip install orchard-lab`: the bench and the verdict) lacks.

A lab command checks for them before it touches anything, so a light install meets one line naming the extra
(`orchard-lab[lab]`) rather than a traceback halfway through a lab's start.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from typing import Any

import click

from orchard.errors import UsageError

# import names of the `[lab]` extra's packages (pyproject.toml), each of which some lab command imports
LAB_MODULES = ("libtmux", "distributed", "cryptography", "plotly", "starlette", "uvicorn")
LAB_INSTALL = "pip install 'orchard-lab[lab]'"


def missing_lab_modules() -> list[str]:
    """The lab's packages this Python cannot import (None in `sys.modules` is Python's mark for that too)."""
    return [name for name in LAB_MODULES
            if (sys.modules[name] is None if name in sys.modules else importlib.util.find_spec(name) is None)]


def needing_lab(command: click.Command) -> click.Command:
    """`command`, checking first that the lab's packages are installed (its `--help` works without them)."""
    callback = command.callback
    if callback is None:
        return command

    @functools.wraps(callback)
    def checked(*args: Any, **kwargs: Any) -> Any:
        missing = missing_lab_modules()
        if missing:
            raise UsageError(f"orchard {command.name} needs the lab's packages, not installed here "
                             f"({', '.join(missing)}): {LAB_INSTALL}")
        return callback(*args, **kwargs)

    command.callback = checked
    return command
