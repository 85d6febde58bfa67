"""A group of wins as one branch on the lab's starting main: one described commit per win, in merge order.

Each commit applies exactly the patch the judge judged last for that win
(checked against its sha256 and scope, as landing checks it) to a fresh
judge-owned checkout, and is described as the lab described it when it
landed (hypothesis, verdict table), with the lab's confirmation and flags
(a win beyond the plausible bound confirmed on held-out inputs, a reviewer's
word, a rebase). The branch goes into the lab's own target clone, never its
main; publishing it is `--push`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchard.lab.finalize.wins import Win
from orchard.lab.judge.verdict_view import after_pairs
from orchard.lab.landing.lab_note import lab_note
from orchard.lab.landing.land_checks import checked_patch
from orchard.lab.records.build import CheckName
from orchard.lab.text import visible
from orchard.lab.workers.vcs import VcsError
from orchard.lab.workers.workspace.builds import checkout_with_patch
from orchard.lab.workers.workspace.workspace import Workspace

FLAGGED = (CheckName.PLAUSIBLE, CheckName.REVIEW)  # checks a reviewer should read, when they ran


def description(win: Win) -> str:
    """The commit message: the lab's note, then its confirmation and flags."""
    verdict = win.confirmation
    confirmed = ("none recorded" if verdict is None else
                 f"{verdict.verdict} {after_pairs(verdict.pairs)} (seed {verdict.seed}), on fresh samples")
    lines = [f"Confirmation: {confirmed}."]
    flags = [f"{c.name}: {visible(c.detail)}" for c in win.judgment.checks if c.name in FLAGGED]
    if win.rebased:
        flags.append("rebased in the lab onto a main that had moved, and judged again there")
    lines += [f"Flag: {flag}" for flag in flags]
    lines.append(f"Landed in the lab as merge {win.merge_commit[:12]}.")
    return lab_note(win.hypothesis, win.judgment, win.name) + "\n" + "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Made:
    """The branch made (its head and its whole change against the start), or why it could not be."""

    commit: str = ""
    patch: str = ""
    refused: str = ""


def make_branch(ws: Workspace, main: str, branch: str, group: Sequence[Win], start: str) -> Made:
    """Commit each win of `group` on `branch` from `start`, and put the branch in the lab's target clone."""
    if branch == main:
        raise AssertionError(f"a review branch is never the lab's main ({branch})")
    vcs = ws.target_vcs
    checkout = checkout_with_patch(ws, ws.judge_dir / "review" / branch.replace("/", "-") / "target", start, "")
    for index, win in enumerate(group):
        checked_patch(win.name, win.judgment, win.hypothesis)
        try:
            vcs.apply(checkout, win.judgment.patch)
        except VcsError as error:
            return Made(refused=f"{win.name}'s change does not apply to the starting main {start[:12]}"
                                f"{' after ' + ', '.join(w.name for w in group[:index]) if index else ''}: "
                                f"{error.summary}")
        vcs.commit(checkout, description(win), branch=branch if index == 0 else None, ignore=ws.config.target.ignore)
    vcs.push(checkout, branch, force=True)  # into the lab's target clone (its origin): the lab's own branch
    return Made(vcs.head(checkout), vcs.changes(checkout, start, ws.config.target.ignore).patch)

