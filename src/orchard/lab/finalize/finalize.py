"""`orchard finalize LAB [--push]`: the landed wins as review branches, REVIEW.md, pull-request bodies.

Each group of wins (`wins.groups`) becomes a branch on the lab's starting
main (`branches`), judged alone against it (`judged`); the best single
attempt is judged alone too, or taken from its own branch (`best_win`);
all of it is recorded in lab.db (`records/review.py`). Running it again
changes nothing: a branch made from the same patches on the same start, still
where it was left, keeps its commit and its verdict (nothing is measured
twice), and REVIEW.md, the bodies and FINAL_REPORT.md come out the same.
`--push` publishes the branches to the user's repository, never its main,
and never over a branch someone moved there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from orchard.errors import UsageError
from orchard.lab.db import workspace_lock
from orchard.lab.db.state import LabState
from orchard.lab.finalize import best_win
from orchard.lab.finalize.branches import make_branch
from orchard.lab.finalize.judged import judged_alone
from orchard.lab.finalize.review_file import FetchFrom, pull_request_body, render_review
from orchard.lab.finalize.wins import Win, branch_name, groups, label, landed_wins
from orchard.lab.judge.measuring import MeasureProgress, gate_names
from orchard.lab.landing.publication import lab_name, main_branch, push
from orchard.lab.loop.start import recorded_start
from orchard.lab.notebook.files import render_final_report, write_atomic
from orchard.lab.notebook.view import build
from orchard.lab.records.land_steps import BranchPushed
from orchard.lab.records.review_branches import REVIEW_KEY, BestSingle, Review, ReviewBranch, ReviewOutcome, outcome_of
from orchard.lab.workers.vcs import VcsError
from orchard.lab.workers.workspace.patches import diff_stat
from orchard.lab.workers.workspace.workspace import Workspace

Say = Callable[[str], None]


@dataclass(frozen=True)
class Finalized:
    """What finalize left: the record, the files it wrote, and each push (with --push)."""

    review: Review
    review_file: Path
    bodies: tuple[Path, ...]
    pushed: tuple[BranchPushed, ...] = ()

    def lines(self) -> list[str]:
        """What the command prints: each branch and its state, each push, where REVIEW.md is."""
        out = [f"{b.branch}: {b.outcome} ({', '.join(b.wins)})" for b in self.review.branches]
        out += [f"pushed {p.branch} ({p.commit[:10]})" if p.reachable else f"NOT pushed {p.branch}: {p.error}"
                for p in self.pushed]
        return [*out, f"review: {self.review_file}"] if out else [f"no landed wins; review: {self.review_file}"]


def finalize(root: Path, *, push_branches: bool = False, say: Say = print,
             measure_progress: MeasureProgress | None = None) -> Finalized:
    """Make, judge and describe the review branches of the lab at `root` (refused while the lab runs)."""
    ws = Workspace.open(root)
    with workspace_lock.hold(ws.root):  # a running lab would move main while its wins are read
        state = LabState.open(ws.root)
        try:
            return _finalize(ws, state, push_branches, say, measure_progress)
        finally:
            state.close()


def _kept(ws: Workspace, prior: ReviewBranch | None, start: str, patches: tuple[str, ...]) -> bool:
    """Whether a recorded branch is still what finalize would make: same start, same patches, still there."""
    if prior is None or prior.made_from() != (start, patches):
        return False
    if not prior.commit:
        return True
    try:
        return ws.target_vcs.resolve(ws.reference_target, prior.branch) == prior.commit
    except VcsError:
        return False


def _branch(ws: Workspace, state: LabState, name: str, group: Sequence[Win], start: str, say: Say,
            measure_progress: MeasureProgress | None) -> ReviewBranch:
    files = tuple(sorted({f for win in group for f in win.files}))
    patches = tuple(win.judgment.patch_sha256 for win in group)
    wins = tuple(win.name for win in group)
    say(f"{name}: {len(group)} win{'s' if len(group) > 1 else ''} on the starting main {start[:12]}")
    made = make_branch(ws, main_branch(ws, state), name, group, start)
    if made.refused:
        return ReviewBranch(name, wins, files, start, patches, "", ReviewOutcome.DOES_NOT_APPLY, (made.refused,))
    say(f"{name}: judged alone against the starting main")
    judgment = judged_alone(ws, state, "review-" + label(wins), group, made.patch, start,
                            progress=say, measure_progress=measure_progress)
    return ReviewBranch(name, wins, files, start, patches, made.commit, outcome_of(judgment), judgment.reasons,
                        judgment, diff_stat(made.patch))


def _best(ws: Workspace, state: LabState, wins: Sequence[Win], branches: Sequence[ReviewBranch], start: str,
          prior: BestSingle | None, say: Say, measure_progress: MeasureProgress | None) -> BestSingle:
    metric = best_win.primary_metric(ws, wins)
    win = best_win.best_win(wins, metric)
    best = best_win.unmeasured(metric, win)
    if win is None:
        return best
    own = best_win.alone_in(branches, win)
    if own is not None:
        return BestSingle(best.metric, best.experiment, best.confirmed, best.patch_sha256, own.judgment)
    if prior is not None and prior.judgment is not None and (prior.experiment, prior.patch_sha256) == (
            best.experiment, best.patch_sha256):
        return prior
    say(f"best single attempt {win.name}: judged alone against the starting main")
    judgment = judged_alone(ws, state, f"alone-{win.name}", [win], win.judgment.patch, start, progress=say,
                            measure_progress=measure_progress)
    return BestSingle(best.metric, best.experiment, best.confirmed, best.patch_sha256, judgment)


def _finalize(ws: Workspace, state: LabState, push_branches: bool, say: Say,
              measure_progress: MeasureProgress | None) -> Finalized:
    started = recorded_start(state)
    if started is None:
        raise UsageError(f"{ws.root}: the lab has not started (no lab start in its journal): nothing to finalize")
    start, wins = started.base, landed_wins(state)
    previous = Review.from_json(state.meta(REVIEW_KEY))
    old = {b.branch: b for b in previous.branches} if previous is not None and previous.start == start else {}
    branches: list[ReviewBranch] = []
    lab = lab_name(ws, state)
    for group in groups(wins):
        name = branch_name(lab, group)
        prior = old.get(name)
        patches = tuple(win.judgment.patch_sha256 for win in group)
        kept = prior if prior is not None and _kept(ws, prior, start, patches) else None
        branches.append(kept or _branch(ws, state, name, group, start, say, measure_progress))
        state.set_meta(REVIEW_KEY, Review(start, tuple(branches)).to_json())  # a crash keeps what is done
    best = _best(ws, state, wins, branches, start, None if previous is None else previous.best, say,
                 measure_progress)
    review = Review(start, tuple(branches), best)
    state.set_meta(REVIEW_KEY, review.to_json())
    return _write(ws, state, review, wins, push_branches)


def _write(ws: Workspace, state: LabState, review: Review, wins: Sequence[Win], push_branches: bool) -> Finalized:
    """The pushes (with `--push`); then REVIEW.md, a body per branch in `review/`, FINAL_REPORT.md once the lab
    stopped, each naming where a branch is taken from: the target when it is there, else the lab's clone."""
    pushed = tuple(push(ws, b.branch, record=BranchPushed) for b in review.branches
                   if push_branches and b.commit and b.branch.startswith("review/"))
    there = {p.branch for p in pushed if p.reachable}
    sources = {b.branch: FetchFrom(ws.config.target.repo, True) if b.branch in there else
               FetchFrom(str(ws.reference_target), False) for b in review.branches}
    gates = gate_names(ws)
    write_if_changed(ws.root / "REVIEW.md", render_review(review, wins, sources, main_branch(ws, state), gates))
    by_name = {w.name: w for w in wins}
    bodies = []
    for branch in review.branches:
        path = ws.root / "review" / f"{label(branch.wins)}.md"  # the lab's own directory: no lab name needed
        path.parent.mkdir(exist_ok=True)
        write_if_changed(path, pull_request_body(branch, [by_name[w] for w in branch.wins], sources[branch.branch],
                                                 gates))
        bodies.append(path)
    if (ws.root / "FINAL_REPORT.md").exists():
        write_if_changed(ws.root / "FINAL_REPORT.md", render_final_report(build(ws, state, live=False)))
    return Finalized(review, ws.root / "REVIEW.md", tuple(bodies), pushed)


def write_if_changed(path: Path, text: str) -> None:
    """Write `text` unless the file already holds it (a second finalize touches nothing)."""
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        write_atomic(path, text)
