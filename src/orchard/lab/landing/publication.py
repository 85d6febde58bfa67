"""Where the lab's wins reach the user, and its integration branch.

Each lab publishes under its own name (its workspace directory's, recorded
at its start), so several labs share one target and none moves another's
branches. A bare target repository (or a URL) receives
`lab/<lab>/<experiment>` branches and its main branch; a target that is a
working copy (its main checked out) never has a checked-out branch pushed
to: it receives `lab/<lab>/<experiment>` branches and `lab/<lab>/main`, the
lab's main, and the final report prints the `git log` and `git merge`
commands that bring it in. Every push is a fast-forward: a branch someone
else moved is refused, naming the commit's author and subject.
`check_publication` pushes the lab's main there at every run's start (after
`pins.check`), so a target that refuses is named, with the fix, before any
experiment.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from orchard.errors import UsageError
from orchard.lab.judge.measuring import LabIntegrityError
from orchard.lab.landing import pins
from orchard.lab.records.land_steps import Pushed
from orchard.lab.text import visible
from orchard.lab.workers.vcs import VcsError
from orchard.lab.workers.workspace.workspace import Workspace

if TYPE_CHECKING:
    from orchard.lab.db.state import LabState

P = TypeVar("P", bound=Pushed)
_NOT_IN_A_BRANCH = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class Publication:
    """Where the lab's main reaches the user: the target repository and the branch that carries it."""

    repo: str
    main: str  # the lab's integration branch (in its own clone)
    ref: str  # the branch the lab's main is pushed to in `repo`
    prefix: str = "lab/"  # of its experiments' branches: `lab/<lab>/` (`lab/` for a lab recorded before names)

    @property
    def into_user_main(self) -> bool:
        return self.ref == self.main

    def commands(self) -> list[str]:
        """What a user types to see, and take, the lab's wins."""
        if self.into_user_main:
            return [f"git -C {self.repo} log --oneline {self.main}"]
        return [f"git -C {self.repo} log --oneline {self.main}..{self.ref}",
                f"git -C {self.repo} merge {self.ref}"]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def main_branch(ws: Workspace, state: LabState) -> str:
    """The branch the lab integrates on, recorded at the lab's start."""
    name = state.meta("main_branch")
    if name is None:
        name = ws.target_vcs.current_branch(ws.reference_target) or "main"
        state.set_meta("main_branch", name)
    return name


def lab_name(ws: Workspace, state: LabState) -> str:
    """The lab's name in the target's branches: its workspace directory's, made a valid branch name, recorded at
    its start (a workspace moved later keeps publishing where it did)."""
    name = state.meta("lab_name")
    if name is None:
        name = _NOT_IN_A_BRANCH.sub("-", ws.root.name).replace("..", ".").strip(".-").removesuffix(".lock") or "lab"
        state.set_meta("lab_name", name)
    return name


def publication(ws: Workspace, state: LabState, main: str) -> Publication:
    """Where wins go: a working copy gets `lab/<lab>/main`, anything else its own main branch."""
    repo, prefix = ws.config.target.repo, f"lab/{lab_name(ws, state)}/"
    return Publication(repo, main, prefix + "main" if ws.target_vcs.is_working_copy(repo) else main, prefix)


def check_published(ws: Workspace, state: LabState, where: Publication) -> None:
    """The branch the lab publishes to holds only the lab's own main (or nothing yet), else `LabIntegrityError`."""
    pins.check(ws, state, where.main)
    try:
        there = ws.target_vcs.remote_head(ws.reference_target, where.ref)
    except VcsError:
        return  # unreachable now: the push says so, with its own reason
    if there and not ws.target_vcs.contains(ws.reference_target, there, where.main):
        made = ws.target_vcs.describe(Path(where.repo), there) if Path(where.repo).is_dir() else None
        raise LabIntegrityError(
            f"{where.ref} in {where.repo} is at {there[:12]}, a commit the lab's main never held "
            f"({visible(made) if made else 'its author unknown here'}): someone moved the branch this lab "
            f"({where.prefix}*) publishes to; nothing was merged or pushed. Move it back to the lab's main, or "
            f"remove it, to go on")


def check_publication(ws: Workspace, state: LabState) -> Publication:
    """Push the lab's main to where wins go, now: a target that refuses is a configuration error."""
    where = publication(ws, state, main_branch(ws, state))
    check_published(ws, state, where)
    if where.ref != where.main and ws.target_vcs.current_branch(Path(where.repo)) == where.ref:
        raise UsageError(f"target.repo {where.repo}: {where.ref} is checked out there, and the lab publishes its "
                         f"main to that branch: switch to another branch (`git -C {where.repo} switch "
                         f"{where.main}`); nothing was run")
    try:
        ws.target_vcs.push(ws.reference_target, where.main, as_branch=where.ref)
    except VcsError as error:
        raise UsageError(
            f"target.repo {where.repo}: the lab cannot publish its wins there ({error.summary}); "
            f"it pushes {where.ref} and {where.prefix}<experiment> branches: make the repository writable, or point "
            f"target.repo at a bare clone (`git clone --bare {where.repo} lab-remote.git`); nothing was run"
        ) from None
    state.set_meta("publication", json.dumps(where.to_dict()))
    return where


def push(ws: Workspace, branch: str, as_branch: str | None = None, *, record: type[P]) -> P:
    """Push a branch from the lab's clone to the target repository, and read it back there."""
    vcs, reference = ws.target_vcs, ws.reference_target
    commit = vcs.resolve(reference, branch)
    remote = as_branch or branch
    try:
        vcs.push(reference, branch, as_branch=as_branch)
        there = vcs.remote_head(reference, remote)
    except VcsError as error:
        return record(remote, commit, False, _in_the_way(ws, remote) or error.summary)
    reachable = there is None or there == commit
    return record(remote, commit, reachable, None if reachable else f"{remote} there is {there or 'missing'}, "
                  f"not {commit[:10]}")


def _in_the_way(ws: Workspace, branch: str) -> str | None:
    """A branch of the target named as a folder of `branch` (`review/x` for `review/x/win`, left there by an
    orchard before several labs), which git cannot keep beside it: what is in the way, and a rename out of it."""
    parts = branch.split("/")
    for prefix in ("/".join(parts[:n]) for n in range(1, len(parts))):
        if ws.target_vcs.remote_head(ws.reference_target, prefix):
            top, _, rest = prefix.partition("/")
            aside = f"{top}-old/{rest}" if rest else f"{top}-old"
            return (f"the target's branch {prefix} is in the way of {branch} (git keeps no branch beside a "
                    f"folder of branches of the same name): rename it, `git -C {ws.config.target.repo} branch -m "
                    f"{prefix} {aside}`, and push again")
    return None
