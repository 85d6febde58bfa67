"""Landing a win: a recorded sequence of idempotent steps, resumed where it stopped.

The steps (`land_steps.LandStep`), each journaled with its typed record the
moment it is done:

1. `land`: the patch is committed on `lab/<experiment>` with a lab note
   (hypothesis, result, numbers, n, floor) in the lab's target clone;
2. `rebase`: when main moved since the experiment's base, the patch is
   applied to the new main and judged again from clean (a conflict or a
   lost win keeps the branch unmerged); recorded also when not needed;
3. `confirm`: a confirmation verdict on fresh samples, against lucky winners
   (when the rebase judged the patch again on a moved main, that judgment,
   itself on fresh samples after the win was picked, is the confirmation);
4. `push`: the branch is published to the target repository, only now;
5. `merge`: into the lab's main (a merge found already there is recorded, not
   made again);
6. `publish`: the lab's main goes to the target repository, and the commit is
   confirmed reachable there (never "merged" for a commit the user cannot reach);
7. `main-check`: main measured against the previous main;
8. `revert` and `publish-revert`: a combined regression reverts the merge.

A run killed anywhere resumes at the first step not recorded; every step
checks what is already there before acting, so nothing happens twice.

Nothing reaches the user's repository unless the journal holds the judge's
LAND judgment of this very patch (its sha256): an experiment row that says
LAND without one is `LabIntegrityError`. What lands is only the patch the
judge judged (stored with its judgment,
its sha256 checked, its scope and files checked again), applied to a fresh
judge-owned checkout of the base: never a worker's checkout, never a
checkout a record names; the confirmation verdict measures that same patch,
built again from clean, never a binary a record names. The lab's main is pinned (`pins`): before a rebase,
a push, a merge or a publish, main must be where the lab left it.

Where the wins go is `publication`'s concern.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from orchard.lab.judge.ladder import Progress
from orchard.lab.judge.measuring import LabIntegrityError, MeasureProgress, Verdict, VerdictWord
from orchard.lab.judge.second_look import killed_by_regression_alone, regressed_alone
from orchard.lab.landing import pins
from orchard.lab.landing.lab_note import lab_note
from orchard.lab.landing.land_checks import checked_patch, landing_checkout, recorded_judgment
from orchard.lab.landing.measured import Measurements, OnThisMachine
from orchard.lab.landing.publication import Publication, check_published, main_branch, publication, push
from orchard.lab.records.events import Event, EventKind
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import Hypothesis
from orchard.lab.records.judge_host import JudgeLost
from orchard.lab.records.judgment import Decision, Judgment
from orchard.lab.records.land_steps import (
    BranchPushed,
    Committed,
    Confirmed,
    LandStep,
    MainChecked,
    MainPublished,
    Merged,
    Pushed,
    Rebased,
    Reverted,
    RevertPublished,
)
from orchard.lab.text import visible
from orchard.lab.workers.workspace.workspace import Workspace

if TYPE_CHECKING:
    from orchard.lab.db.state import LabState
    from orchard.lab.records.candidate import Candidate
    from orchard.lab.records.db import ExperimentRecord

R = TypeVar("R", bound=Event)
REJUDGED = ("the judgment on the new main at the rebase: a verdict on fresh samples of what lands, taken after the "
            "win was picked")

P = TypeVar("P", bound=Pushed)


@dataclass
class LandOutcome:
    branch: str
    commit: str
    merged: bool
    merge_commit: str | None
    reverted: bool
    notes: list[str]
    published: bool = False  # the merge is reachable in the target repository
    judge_lost: JudgeLost | None = None  # its judge host left before the merge: to be judged again from scratch


class Steps:
    """The landing steps one experiment has done, read back typed from the journal; each done once."""

    def __init__(self, state: LabState, experiment: str) -> None:
        self.state = state
        self.experiment = experiment
        mine = [e for e in state.events() if e.experiment == experiment]
        judged = max((i for i, e in enumerate(mine) if e.kind == EventKind.JUDGMENT), default=-1)
        # the steps of the landing of its latest judgment (a win judged again after its judge host was lost
        # lands anew)
        self.done: dict[str, Event] = {e.kind: e.event for e in mine[judged + 1:]
                                       if e.kind in STEP_KINDS and isinstance(e.event, Event)}

    def run(self, record: type[R], action: Callable[[], R]) -> R:
        """The step that leaves a `record`: done now unless the journal has its record; journaled when done."""
        done = self.done.get(record.kind)
        if done is None:
            done = action()
            self.state.log(done, self.experiment)
            self.done[record.kind] = done
        if not isinstance(done, record):
            raise LabIntegrityError(f"{self.experiment}: the journal's {record.kind} step is not one the lab "
                                    "records: lab.db was edited; nothing more was merged or pushed")
        return done


STEP_KINDS = tuple(LandStep)


def _commit_branch(ws: Workspace, checkout: Path, branch: str, message: str) -> str:
    """Commit the landing checkout on `branch` and push it into the lab's target clone.

    A lab killed after the commit but before recording it commits again from
    a fresh checkout; the push replaces the branch it left (its own, unmerged).
    """
    vcs = ws.target_vcs
    commit = vcs.commit(checkout, message, branch=branch, ignore=ws.config.target.ignore)
    vcs.push(checkout, branch, force=True)  # into the lab's target clone (its origin)
    return commit


@dataclass(frozen=True)
class Landing:
    """One win's landing: each step a method returning the record it journals."""

    ws: Workspace
    state: LabState
    record: ExperimentRecord
    judgment: Judgment
    hypothesis: Hypothesis
    main: str  # the lab's integration branch
    where: Publication
    progress: Progress
    measure_progress: MeasureProgress | None
    measurements: Measurements  # where its verdicts run: this machine, or the judge host that judged the win

    @property
    def name(self) -> str:
        return self.record.name

    def commit(self) -> Committed:
        branch = self.where.prefix + self.name
        self.progress(f"{self.name}: commit on {branch}")
        checkout = landing_checkout(self.ws, self.name, self.judgment.base or "", self.judgment, self.hypothesis)
        commit = _commit_branch(self.ws, checkout, branch, lab_note(self.hypothesis, self.judgment, self.name))
        self.state.update_experiment(self.name, branch=branch, land_commit=commit, status=ExperimentStatus.LANDING)
        return Committed(branch, commit)

    def rebase(self, landed: Committed) -> Rebased:
        """Main as it is now; when it moved since the judged base, the patch judged again on it, from clean."""
        ws, name, base = self.ws, self.name, self.judgment.base or ""
        main_head = pins.check(ws, self.state, self.main).head
        if main_head == base:
            return Rebased(False, main_head, landed.branch, landed.commit)
        self.progress(f"{name}: main moved ({base[:10]} -> {main_head[:10]}): rebase and judge again")
        assert self.record.candidate is not None
        judged = replace(self.record.candidate, patch=self.judgment.patch, flags=[])  # what was judged, nothing else
        rebased = self._rejudged(judged, main_head)
        if rebased.decision != Decision.LAND:
            return Rebased(True, main_head, landed.branch, landed.commit, main_head, rebased.decision,
                           rebased.reasons, rebased)
        branch = f"{landed.branch}-on-{main_head[:10]}"
        checkout = landing_checkout(ws, f"{name}-on-{main_head[:10]}", main_head, rebased, self.hypothesis)
        commit = _commit_branch(ws, checkout, branch, lab_note(self.hypothesis, rebased, name))
        self.state.update_experiment(name, branch=branch, land_commit=commit, judgment=rebased)
        return Rebased(True, main_head, branch, commit, main_head, rebased.decision, rebased.reasons, rebased)

    def _rejudged(self, judged: Candidate, main_head: str) -> Judgment:
        """The patch judged on the new main. A win KILLed there by a metric's regression alone (its own judgment
        saw none) is judged once more on fresh samples, and that decides: a regression seen twice is real; one
        seen once may be the verdict's false-alarm rate on a loaded machine, and an honest win is not lost to it."""
        name = f"{self.name}-on-{main_head[:10]}"
        first = self.measurements.rejudge(self.ws, self.state, name, judged, main_head, self.record.bench_base,
                                          self.progress, self.measure_progress)
        if not killed_by_regression_alone(first):
            return first
        said = "; ".join(first.reasons)
        self.progress(f"{self.name}: on the new main {said}; judged once more on fresh samples")
        again = self.measurements.rejudge(self.ws, self.state, f"{name}-again", judged, main_head,
                                          self.record.bench_base, self.progress, self.measure_progress)
        seen = "seen again" if killed_by_regression_alone(again) else "not seen again"
        return replace(again, reasons=(*again.reasons, f"a first judgment on this main said {said}: {seen}"))

    def confirm(self, main_head: str, current: Judgment, rebase: Rebased) -> Confirmed:
        rejudged = rebase.judgment.verdict if rebase.needed and rebase.judgment is not None else None
        if rejudged is not None and rejudged.verdict == VerdictWord.PASS:
            self.progress(f"{self.name}: its judgment on the new main, on fresh samples, is the confirmation")
            return Confirmed(verdict=rejudged, judge=self.measurements.judge, by=REJUDGED)
        self.progress(f"{self.name}: confirmation verdict on fresh samples")
        verdict = self._confirmation(main_head, current, self.name)
        if not isinstance(verdict, str) and regressed_alone(verdict):
            self.progress(f"{self.name}: the confirmation verdict was REGRESSED ({'; '.join(verdict.reasons)}); "
                          "confirmed once more on fresh samples")
            verdict = self._confirmation(main_head, current, f"{self.name}-again")
        judge = self.measurements.judge
        return Confirmed(refused=verdict, judge=judge) if isinstance(verdict, str) else Confirmed(verdict=verdict,
                                                                                                   judge=judge)

    def _confirmation(self, main_head: str, current: Judgment, name: str) -> Verdict | str:
        return self.measurements.confirm(self.ws, self.state, main_head, current, name, self.hypothesis,
                                         self.measure_progress)

    def push_branch(self, branch: str, commit: str) -> BranchPushed:
        """The branch to the user's repository: only now, after the confirmation passed."""
        check_published(self.ws, self.state, self.where)
        if self.ws.target_vcs.resolve(self.ws.reference_target, branch) != commit:
            raise LabIntegrityError(f"{branch} in the lab's target clone is not the commit the lab made "
                                    f"({commit[:12]}): someone moved it; nothing was pushed or merged")
        return push(self.ws, branch, record=BranchPushed)

    def merge(self, branch: str, commit: str, main_head: str) -> Merged:
        vcs, reference, main = self.ws.target_vcs, self.ws.reference_target, self.main
        if vcs.contains(reference, commit, main):  # merged before a kill, not yet recorded
            return Merged(branch, main, vcs.resolve(reference, main), main_head, "found merged after a restart")
        self.progress(f"{self.name}: merge {branch} into {main}")
        pins.expect(self.ws, self.state, main, (main_head, commit), commit)
        message = f"lab: merge {branch}: {visible(self.hypothesis.title)}\n"
        merged = vcs.merge(reference, commit, into=main, message=message)
        pins.pin(self.ws, self.state, main)
        return Merged(branch, main, merged, main_head)

    def publish(self, record: type[P]) -> P:
        check_published(self.ws, self.state, self.where)
        return push(self.ws, self.main, self.where.ref, record=record)

    def main_check(self, merged: Merged) -> MainChecked:
        self.progress(f"{self.name}: main after the merge against the previous main")
        ws, state = self.ws, self.state
        check, where = self.measurements.main_check(ws, state, merged.previous, merged.commit, self.measure_progress)
        before, after = check.medians()
        regressed = check.verdict in (VerdictWord.REGRESSED, VerdictWord.ERROR)
        if not regressed:
            state.add_measurement("main", merged.commit, after, self.name)
        return MainChecked(check, regressed, before, where)

    def revert(self, merged: Merged, checked: MainChecked) -> Reverted:
        vcs, reference, main = self.ws.target_vcs, self.ws.reference_target, self.main
        head = vcs.resolve(reference, main)
        if head != merged.commit:  # reverted before a kill, not yet recorded (pins.check took it as announced)
            revert = head
        else:
            pins.expect(self.ws, self.state, main, (merged.commit,), merged.previous)
            revert = vcs.revert(reference, merged.commit,
                                f"lab: revert {merged.branch}: main regressed after the merge\n")
            pins.pin(self.ws, self.state, main)
        self.state.add_measurement("main", revert, checked.before, self.name)
        return Reverted(merged.commit, revert, _word(checked),
                        "main measured against the previous main regressed after the merge")

    def run(self) -> LandOutcome:
        """The steps in order, each once; a branch that does not pass every check stays in the lab's clone."""
        checked_patch(self.name, self.judgment, self.hypothesis)
        recorded_judgment(self.state, self.name, self.judgment)
        steps = Steps(self.state, self.name)
        landed = steps.run(Committed, self.commit)
        rebase = steps.run(Rebased, lambda: self.rebase(landed))
        branch, commit = rebase.branch, rebase.commit
        if not rebase.lands:
            why = "; ".join(rebase.reasons or ())
            return LandOutcome(branch, commit, False, None, False,
                               [f"not merged: on the new main {rebase.main[:10]} it no longer lands ({why})"])
        current = rebase.judgment if rebase.needed and rebase.judgment is not None else self.judgment
        confirmed = steps.run(Confirmed, lambda: self.confirm(rebase.main, current, rebase))
        if confirmed.verdict is None or confirmed.verdict.verdict != VerdictWord.PASS:
            why = (confirmed.refused or "no confirmation verdict" if confirmed.verdict is None else
                   f"the confirmation verdict was {confirmed.verdict.verdict} ({'; '.join(confirmed.verdict.reasons)})")
            return LandOutcome(branch, commit, False, None, False, [f"not merged: {why}; the branch stays, described"])
        pushed = steps.run(BranchPushed, lambda: self.push_branch(branch, commit))
        notes = [] if pushed.reachable else [f"branch {branch} not published to the target: {pushed.error}"]
        return self._integrate(steps, branch, commit, rebase.main, notes)

    def _integrate(self, steps: Steps, branch: str, commit: str, main_head: str, notes: list[str]) -> LandOutcome:
        """Merge into the lab's main, publish it, check main against the previous main, revert a regression."""
        merged = steps.run(Merged, lambda: self.merge(branch, commit, main_head))
        pins.check(self.ws, self.state, self.main)
        self.state.update_experiment(self.name, merge_commit=merged.commit)
        published = steps.run(MainPublished, lambda: self.publish(MainPublished))
        if not published.reachable:
            notes.append(f"merged in the lab's clone as {merged.commit[:10]} but NOT reachable in "
                         f"{self.where.repo}: {published.error}")
        checked = steps.run(MainChecked, lambda: self.main_check(merged))
        pins.check(self.ws, self.state, self.main)
        if not checked.regressed:
            return LandOutcome(branch, commit, True, merged.commit, False, notes, published.reachable)
        steps.run(Reverted, lambda: self.revert(merged, checked))
        steps.run(RevertPublished, lambda: self.publish(RevertPublished))
        notes.append(f"merged, then reverted: main after the merge was {_word(checked)}")
        return LandOutcome(branch, commit, True, merged.commit, True, notes, published.reachable)


def _word(checked: MainChecked) -> str:
    return "-" if checked.verdict is None else str(checked.verdict.verdict)


def land(
    ws: Workspace,
    state: LabState,
    record: ExperimentRecord,
    judgment: Judgment,
    hypothesis: Hypothesis,
    *,
    progress: Progress = lambda _: None,
    measure_progress: MeasureProgress | None = None,
    measurements: Measurements | None = None,
) -> LandOutcome:
    """Land a judged win (see the module's docstring): resumed at the first step the journal does not hold;
    its verdicts run where `measurements` takes them (this machine unless given)."""
    assert judgment.base is not None
    main = main_branch(ws, state)
    return Landing(ws, state, record, judgment, hypothesis, main, publication(ws, state, main), progress,
                   measure_progress, measurements or OnThisMachine()).run()
