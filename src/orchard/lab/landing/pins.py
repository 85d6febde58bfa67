"""The lab's own target clone, pinned: only the lab moves its main.

`judge/target` is where wins are merged and what the lab publishes. A commit
that appears on its main, or a changed `.git/config` (a new remote, a
driver), without the lab having made it is somebody else's code about to be
rebased onto, merged and pushed. So lab.db records main's head and the
clone's config digest at the start and after every merge and revert the
lab makes, and `check` compares them before anything is assigned, rebased,
merged or pushed: any other movement stops the lab (`LabIntegrityError`).

A merge or revert is announced before it is made (`expect`): a lab killed
between making it and recording it finds main one commit ahead, and takes
that commit only when its parents and tree are exactly what the announced
step makes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from orchard.lab.judge.measuring import LabIntegrityError
from orchard.lab.workers.vcs import VcsError
from orchard.lab.workers.workspace.workspace import Workspace

if TYPE_CHECKING:
    from orchard.lab.db.state import LabState

PIN_KEY = "pinned_main"


@dataclass(frozen=True)
class Pin:
    """Main's head and the clone's config as the lab last left them, and a step it announced."""

    branch: str
    head: str
    config_sha256: str
    expected_parents: tuple[str, ...] = ()  # a merge or revert under way: the commit it makes has these parents
    expected_tree_of: str = ""  # ... and the tree of this commit

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Pin:
        return cls(str(data["branch"]), str(data["head"]), str(data["config_sha256"]),
                   tuple(str(p) for p in data.get("expected_parents", ())), str(data.get("expected_tree_of", "")))


def _config_digest(ws: Workspace) -> str:
    config = ws.reference_target / ".git" / "config"
    return hashlib.sha256(config.read_bytes()).hexdigest() if config.is_file() else ""


def _recorded(state: LabState) -> Pin | None:
    data = state.meta(PIN_KEY)
    return None if data is None else Pin.from_dict(json.loads(data))


def pin(ws: Workspace, state: LabState, branch: str) -> Pin:
    """Record main's head and the clone's config as they are now (the lab just moved main itself)."""
    pinned = Pin(branch, ws.target_vcs.resolve(ws.reference_target, branch), _config_digest(ws))
    state.set_meta(PIN_KEY, json.dumps(pinned.to_dict()))
    return pinned


def expect(ws: Workspace, state: LabState, branch: str, parents: tuple[str, ...], tree_of: str) -> None:
    """Announce the commit the lab is about to put on main: these parents, the tree of `tree_of`."""
    current = check(ws, state, branch)
    state.set_meta(PIN_KEY, json.dumps({**current.to_dict(), "expected_parents": list(parents),
                                        "expected_tree_of": tree_of}))


def _announced(ws: Workspace, pinned: Pin, head: str) -> bool:
    if not pinned.expected_parents:
        return False
    try:
        parents, tree = ws.target_vcs.commit_shape(ws.reference_target, head)
        _, wanted = ws.target_vcs.commit_shape(ws.reference_target, pinned.expected_tree_of)
    except VcsError:
        return False
    return tuple(parents) == pinned.expected_parents and bool(tree) and tree == wanted


def check(ws: Workspace, state: LabState, branch: str) -> Pin:
    """Main and the clone's config as the lab left them, or `LabIntegrityError` (the first call pins them)."""
    pinned = _recorded(state)
    if pinned is None or pinned.branch != branch:
        return pin(ws, state, branch)
    if _config_digest(ws) != pinned.config_sha256:
        raise LabIntegrityError(
            f"{ws.reference_target / '.git' / 'config'} changed since the lab last used it (a remote, hook or "
            "driver may have been planted): nothing was rebased, merged or pushed; restore it by hand")
    checked_out = ws.target_vcs.current_branch(ws.reference_target)
    if checked_out != branch:
        raise LabIntegrityError(
            f"the lab's target clone {ws.reference_target} has {checked_out or 'a detached head'} checked out, "
            f"not {branch}: someone switched it; nothing was assigned, rebased, merged or pushed. Switch it back "
            f"(`git -C {ws.reference_target} switch {branch}`) to go on")
    head = ws.target_vcs.head(ws.reference_target)  # `branch` is checked out: its head is the branch's
    if head != pinned.head:
        if not _announced(ws, pinned, head):
            raise LabIntegrityError(
                f"{branch} of the lab's target clone {ws.reference_target} moved to {head[:12]}, a commit the lab "
                f"did not make (it left {branch} at {pinned.head[:12]}): someone committed there; nothing was "
                f"rebased, merged or pushed. Inspect it "
                f"(`git -C {ws.reference_target} log {pinned.head[:12]}..{branch}`) and reset it "
                f"(`git -C {ws.reference_target} branch -f {branch} {pinned.head[:12]}`) to go on")
        return pin(ws, state, branch)
    return pinned
