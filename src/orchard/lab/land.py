"""Landing a win: a recorded sequence of idempotent steps, resumed where it stopped.

The steps, each recorded in lab.db (an event of its own kind for the
experiment) the moment it is done:

1. `land`: the patch is committed on `lab/<experiment>` with a lab note
   (hypothesis, result, numbers, n, floor) in the lab's target clone;
2. `rebase`: when main moved since the experiment's base, the patch is
   applied to the new main and judged again from clean (a conflict or a
   lost win keeps the branch unmerged); recorded also when not needed;
3. `push`: the branch is published to the target repository;
4. `confirm`: a confirmation verdict on fresh samples, against lucky winners;
5. `merge`: into the lab's main (a merge found already there is recorded, not
   made again);
6. `publish`: the lab's main goes to the target repository, and the commit is
   confirmed reachable there (never "merged" for a commit the user cannot reach);
7. `main-check`: main measured against the previous main;
8. `revert` and `publish-revert`: a combined regression reverts the merge.

A run killed anywhere resumes at the first step not recorded; every step
checks what is already there before acting, so nothing happens twice.

Where the wins go (`Publication`): a bare target repository (or a URL)
receives `lab/<experiment>` branches and its main branch; a target that is a
working copy (its main checked out) never has a checked-out branch pushed to:
it receives `lab/<experiment>` branches and `lab/main`, the lab's main, and
the final report prints the `git log` and `git merge` commands that bring it
in. `check_publication` pushes the lab's main there at every run's start, so
a target that refuses is named, with the fix, before any experiment.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchard.errors import UsageError
from orchard.lab.builds import baseline_binary
from orchard.lab.experiment import ExperimentStatus
from orchard.lab.hypothesis import Hypothesis
from orchard.lab.judge import judge
from orchard.lab.judgment import Decision, Judgment
from orchard.lab.vcs import VcsError
from orchard.lab.verdict_table import after_pairs
from orchard.lab.verdicts import MeasureProgress, Verdict, VerdictWord, measure
from orchard.lab.workspace import Workspace

if TYPE_CHECKING:
    from orchard.lab.state import ExperimentRecord, LabState

Progress = Callable[[str], None]
LAB_MAIN = "lab/main"


@dataclass
class LandOutcome:
    branch: str
    commit: str
    merged: bool
    merge_commit: str | None
    reverted: bool
    notes: list[str]
    published: bool = False  # the merge is reachable in the target repository


@dataclass(frozen=True)
class Publication:
    """Where the lab's main reaches the user: the target repository and the branch that carries it."""

    repo: str
    main: str  # the lab's integration branch (in its own clone)
    ref: str  # the branch the lab's main is pushed to in `repo`

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


def _signed(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:+.2%}"


def lab_note(hypothesis: Hypothesis, judgment: Judgment, experiment: str) -> str:
    """The commit message: what was tried, what came out, with the numbers."""
    verdict = judgment.verdict
    result = "?" if verdict is None else f"{verdict.verdict} {after_pairs(verdict.pairs)} (seed {verdict.seed})"
    lines = [
        f"lab: {hypothesis.title}",
        "",
        f"Experiment {experiment}, hypothesis {hypothesis.id} ({hypothesis.lane} lane).",
        "",
        f"Hypothesis: {hypothesis.change}",
        f"Suspected cause: {hypothesis.suspected_cause or '(not given)'}",
        f"Metric: {hypothesis.metric}; predicted effect: {hypothesis.predicted_text}",
        "",
        f"Result: {result}.",
    ]
    for m in [] if verdict is None else verdict.metrics:
        low, high = m.interval or (None, None)
        lines.append(
            f"  {m.key}: {m.verdict} {_signed(m.effect)} [{_signed(low)}, {_signed(high)}], floor {m.floor:.2%}, "
            f"n={m.n}, {m.baseline_median} -> {m.candidate_median}"
        )
    checks = [c for c in judgment.checks if c.detail != "not configured"]  # only the checks that ran
    lines += ["", "Checks: " + "; ".join(f"{c.name} {'ok' if c.passed else 'FAILED'}" for c in checks)]
    return "\n".join(lines) + "\n"


def main_branch(ws: Workspace, state: LabState) -> str:
    """The branch the lab integrates on, recorded at the lab's start."""
    name = state.meta("main_branch")
    if name is None:
        name = ws.target_vcs.current_branch(ws.reference_target) or "main"
        state.set_meta("main_branch", name)
    return name


def publication(ws: Workspace, main: str) -> Publication:
    """Where wins go: a working copy gets `lab/main`, anything else its own main branch."""
    repo = ws.config.target.repo
    return Publication(repo, main, LAB_MAIN if ws.target_vcs.is_working_copy(repo) else main)


def check_publication(ws: Workspace, state: LabState) -> Publication:
    """Push the lab's main to where wins go, now: a target that refuses is a configuration error."""
    where = publication(ws, main_branch(ws, state))
    if where.ref != where.main and ws.target_vcs.current_branch(Path(where.repo)) == where.ref:
        raise UsageError(f"target.repo {where.repo}: {where.ref} is checked out there, and the lab publishes its "
                         f"main to that branch: switch to another branch (`git -C {where.repo} switch "
                         f"{where.main}`); nothing was run")
    try:
        ws.target_vcs.push(ws.reference_target, where.main, as_branch=where.ref)
    except VcsError as error:
        raise UsageError(
            f"target.repo {where.repo}: the lab cannot publish its wins there ({error.summary}); "
            f"it pushes {where.ref} and lab/<experiment> branches: make the repository writable, or point "
            f"target.repo at a bare clone (`git clone --bare {where.repo} lab-remote.git`); nothing was run"
        ) from None
    state.set_meta("publication", json.dumps(where.to_dict()))
    return where


class Steps:
    """The landing steps one experiment has done, as recorded in lab.db."""

    def __init__(self, state: LabState, experiment: str) -> None:
        self.state = state
        self.experiment = experiment
        self.done: dict[str, dict[str, Any]] = {}
        for event in state.events():
            if event.experiment == experiment and event.kind in STEP_KINDS:
                self.done[event.kind] = event.data

    def run(self, step: str, action: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Do `step` unless it is recorded as done; record what it did."""
        if step not in self.done:
            data = action()
            self.state.log(step, data, self.experiment)
            self.done[step] = data
        return self.done[step]


STEP_KINDS = ("land", "rebase", "push", "confirm", "merge", "publish", "main-check", "revert", "publish-revert")


def _push(ws: Workspace, branch: str, as_branch: str | None = None) -> dict[str, Any]:
    """Push a branch from the lab's clone to the target repository, and read it back there."""
    vcs, reference = ws.target_vcs, ws.reference_target
    commit = vcs.resolve(reference, branch)
    remote = as_branch or branch
    try:
        vcs.push(reference, branch, as_branch=as_branch)
        there = vcs.remote_head(reference, remote)
    except VcsError as error:
        return {"branch": remote, "commit": commit, "reachable": False, "error": error.summary}
    reachable = there is None or there == commit
    return {"branch": remote, "commit": commit, "reachable": reachable,
            **({} if reachable else {"error": f"{remote} there is {there or 'missing'}, not {commit[:10]}"})}


def _commit_branch(ws: Workspace, checkout: str, branch: str, base: str, message: str) -> str:
    """Commit the checkout's change on `branch` and push it into the lab's target clone.

    A lab killed after the commit but before recording it finds the commit
    already there and only pushes it again.
    """
    vcs, path = ws.target_vcs, Path(checkout)
    if vcs.current_branch(path) == branch and vcs.head(path) != base:
        commit = vcs.head(path)
    else:
        commit = vcs.commit(path, message, branch=branch, ignore=ws.config.target.ignore)
    vcs.push(path, branch)  # into the lab's target clone (its origin)
    return commit


def land(
    ws: Workspace,
    state: LabState,
    record: ExperimentRecord,
    judgment: Judgment,
    hypothesis: Hypothesis,
    *,
    progress: Progress = lambda _: None,
    measure_progress: MeasureProgress | None = None,
) -> LandOutcome:
    name = record.name
    title = hypothesis.title
    vcs, reference = ws.target_vcs, ws.reference_target
    main = main_branch(ws, state)
    where = publication(ws, main)
    steps = Steps(state, name)
    assert judgment.checkout is not None and judgment.base is not None

    def commit_step() -> dict[str, Any]:
        branch = f"lab/{name}"
        progress(f"{name}: commit on {branch}")
        commit = _commit_branch(ws, judgment.checkout or "", branch, judgment.base or "",
                                lab_note(hypothesis, judgment, name))
        state.update_experiment(name, branch=branch, land_commit=commit, status=ExperimentStatus.LANDING)
        return {"branch": branch, "commit": commit}

    landed = steps.run("land", commit_step)

    def rebase_step() -> dict[str, Any]:
        main_head = vcs.resolve(reference, main)
        if main_head == judgment.base:
            return {"needed": False, "main": main_head, **landed}
        progress(f"{name}: main moved ({(judgment.base or '')[:10]} -> {main_head[:10]}): rebase and judge again")
        assert record.candidate is not None
        rebased = judge(ws, state, f"{name}-on-{main_head[:10]}", replace(record.candidate, flags=[]), main_head,
                        record.bench_base, progress=progress, measure_progress=measure_progress)
        data: dict[str, Any] = {"needed": True, "main": main_head, "onto": main_head, "decision": rebased.decision,
                                "reasons": rebased.reasons, "judgment": rebased.to_dict()}
        if rebased.decision != Decision.LAND:
            return {**data, **landed}
        branch = f"{landed['branch']}-on-{main_head[:10]}"
        commit = _commit_branch(ws, rebased.checkout or "", branch, main_head,
                                lab_note(hypothesis, rebased, name))
        state.update_experiment(name, branch=branch, land_commit=commit, judgment=rebased)
        return {**data, "branch": branch, "commit": commit}

    rebase = steps.run("rebase", rebase_step)
    branch, commit = rebase["branch"], rebase["commit"]
    pushed = steps.run("push", lambda: _push(ws, branch))
    notes = [] if pushed["reachable"] else [f"branch {branch} not published to the target: {pushed.get('error')}"]
    if rebase.get("decision", Decision.LAND) != Decision.LAND:
        notes.append(f"not merged: on the new main {rebase['main'][:10]} it no longer lands "
                     f"({'; '.join(rebase['reasons'])})")
        return LandOutcome(branch, commit, False, None, False, notes)
    current = judgment if not rebase["needed"] else Judgment.from_dict(rebase["judgment"])
    main_head = rebase["main"]
    baseline = baseline_binary(ws, state, main_head)

    def confirm_step() -> dict[str, Any]:
        progress(f"{name}: confirmation verdict on fresh samples")
        verdict = measure(ws, baseline, Path(current.binary or ""), progress=measure_progress)
        return {"verdict": verdict.to_dict()}

    confirm = Verdict.from_dict(steps.run("confirm", confirm_step)["verdict"])
    if confirm.verdict != VerdictWord.PASS:
        notes.append(f"not merged: the confirmation verdict was {confirm.verdict} "
                     f"({'; '.join(confirm.reasons)}); the branch stays, described")
        return LandOutcome(branch, commit, False, None, False, notes)

    def merge_step() -> dict[str, Any]:
        if vcs.contains(reference, commit, main):  # merged before a kill, not yet recorded
            return {"branch": branch, "into": main, "commit": vcs.resolve(reference, main), "previous": main_head,
                    "note": "found merged after a restart"}
        progress(f"{name}: merge {branch} into {main}")
        merged = vcs.merge(reference, branch, into=main, message=f"lab: merge {branch}: {title}\n")
        return {"branch": branch, "into": main, "commit": merged, "previous": main_head}

    merge_commit = steps.run("merge", merge_step)["commit"]
    state.update_experiment(name, merge_commit=merge_commit)
    published = steps.run("publish", lambda: _push(ws, main, where.ref))
    if not published["reachable"]:
        notes.append(f"merged in the lab's clone as {merge_commit[:10]} but NOT reachable in {where.repo}: "
                     f"{published.get('error')}")

    def check_step() -> dict[str, Any]:
        progress(f"{name}: main after the merge against the previous main")
        check = measure(ws, baseline, baseline_binary(ws, state, merge_commit), progress=measure_progress)
        before, after = check.medians()
        regressed = check.verdict in (VerdictWord.REGRESSED, VerdictWord.ERROR)
        if not regressed:
            state.add_measurement("main", merge_commit, after, name)
        return {"verdict": check.to_dict(), "regressed": regressed, "before": before}

    checked = steps.run("main-check", check_step)
    if not checked["regressed"]:
        return LandOutcome(branch, commit, True, merge_commit, False, notes, bool(published["reachable"]))

    def revert_step() -> dict[str, Any]:
        head = vcs.resolve(reference, main)
        if head != merge_commit:  # reverted before a kill, not yet recorded
            revert = head
        else:
            revert = vcs.revert(reference, merge_commit, f"lab: revert {branch}: main regressed after the merge\n")
        state.add_measurement("main", revert, checked["before"], name)
        return {"merge": merge_commit, "revert": revert, "verdict": checked["verdict"]["verdict"],
                "why": "main measured against the previous main regressed after the merge"}

    steps.run("revert", revert_step)
    steps.run("publish-revert", lambda: _push(ws, main, where.ref))
    notes.append(f"merged, then reverted: main after the merge was {checked['verdict']['verdict']}")
    return LandOutcome(branch, commit, True, merge_commit, True, notes, bool(published["reachable"]))

