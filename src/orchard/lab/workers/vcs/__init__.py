"""Version-control adapters: one interface (`Vcs`), one module per system."""

from __future__ import annotations

from orchard.errors import UsageError
from orchard.lab.workers.vcs.base import Changes, Identity, Vcs, VcsError
from orchard.lab.workers.vcs.git import GitVcs
from orchard.lab.workers.vcs.oak import OakVcs, ResetUnsupported

ADAPTERS: dict[str, type[Vcs]] = {"git": GitVcs, "oak": OakVcs}


def get_vcs(kind: str, identity: Identity | None = None) -> Vcs:
    """The adapter for `kind` (`git` or `oak`)."""
    try:
        return ADAPTERS[kind](identity)
    except KeyError:
        raise UsageError(f"unknown VCS {kind!r}; known: {', '.join(ADAPTERS)}") from None


__all__ = ["ADAPTERS", "Changes", "GitVcs", "Identity", "OakVcs", "ResetUnsupported", "Vcs",
           "VcsError", "get_vcs"]
