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

What lands is only the patch the judge judged (stored with its judgment,
its sha256 checked, its scope and files checked again), applied to a fresh
judge-owned checkout of the base: never a worker's checkout, never a
checkout a record names; the confirmation verdict measures that same patch,
built again from clean, never a binary a record names. The lab's main is pinned (`pins`): before a rebase,
a push, a merge or a publish, main must be where the lab left it.

Where the wins go is `publication`'s concern.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchard.lab.judge import special_files
from orchard.lab.judge.candidate import patch_files
from orchard.lab.judge.ladder import judge
from orchard.lab.judge.measuring import (
    BinaryChanged,
    LabIntegrityError,
    MeasureProgress,
    Verdict,
    VerdictWord,
    measure,
)
from orchard.lab.judge.verdict_view import after_pairs
from orchard.lab.landing import pins
from orchard.lab.landing.publication import check_published, main_branch, publication, push
from orchard.lab.records.experiment import ExperimentStatus
from orchard.lab.records.hypothesis import Hypothesis, outside_scope
from orchard.lab.records.judgment import Decision, Judgment, patch_digest
from orchard.lab.text import a_few
from orchard.lab.workers.builds import baseline_binary, candidate_step, checkout_with_patch, hash_build, placeholders
from orchard.lab.workers.workspace import Workspace

if TYPE_CHECKING:
    from orchard.lab.db.state import LabState
    from orchard.lab.records.db import ExperimentRecord

Progress = Callable[[str], None]


@dataclass
class LandOutcome:
    branch: str
    commit: str
    merged: bool
    merge_commit: str | None
    reverted: bool
    notes: list[str]
    published: bool = False  # the merge is reachable in the target repository


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


def landing_checkout(ws: Workspace, name: str, base: str, judgment: Judgment, hypothesis: Hypothesis,
                     purpose: str = "land") -> Path:
    """A fresh judge-owned checkout of `base` plus exactly the judged patch, checked again before it lands."""
    patch = judgment.patch
    if not patch or patch_digest(patch) != judgment.patch_sha256:
        raise LabIntegrityError(f"{name}: the judged patch stored in lab.db does not match its sha256 (or is "
                                "missing): lab.db was edited; nothing was committed, merged or pushed")
    files = patch_files(patch)
    refused = [f"outside the scope: {a_few(v)}" for v in [outside_scope(files, hypothesis.scope)] if v]
    refused += special_files.in_patch(patch)
    if not files or refused:
        raise LabIntegrityError(f"{name}: the patch recorded as judged is not one the judge passes "
                                f"({'; '.join(refused) or 'it changes no file'}): lab.db was edited; nothing was "
                                "committed, merged or pushed")
    return checkout_with_patch(ws, ws.judge_dir / name / purpose, base, patch)


def _commit_branch(ws: Workspace, checkout: Path, branch: str, message: str) -> str:
    """Commit the landing checkout on `branch` and push it into the lab's target clone.

    A lab killed after the commit but before recording it commits again from
    a fresh checkout; the push replaces the branch it left (its own, unmerged).
    """
    vcs = ws.target_vcs
    commit = vcs.commit(checkout, message, branch=branch, ignore=ws.config.target.ignore)
    vcs.push(checkout, branch, force=True)  # into the lab's target clone (its origin)
    return commit


def _confirm(ws: Workspace, state: LabState, main_head: str, current: Judgment, name: str,
             hypothesis: Hypothesis, measure_progress: MeasureProgress | None) -> Verdict | str:
    """The confirmation verdict of exactly what lands, built and tested again from clean; or why there is none.

    No binary a record names is measured: the judged patch (checked as for
    the commit) is applied to a fresh checkout of main and built here.
    """
    checkout = landing_checkout(ws, name, main_head, current, hypothesis, purpose="confirm")
    binary = ws.binary_in(checkout)
    values, logs = placeholders(ws, checkout, binary), checkout.parent / "confirm-logs"
    for step, command in (("build", ws.config.target.build), ("tests", ws.config.target.test)):
        check = candidate_step(ws, step, command, checkout, values, logs)
        if not check.passed:
            return f"what lands fails its {step} from clean for the confirmation: {check.detail}"
    if binary is None or not binary.exists():
        return f"what lands builds no binary at {ws.config.target.binary}"
    built = hash_build(binary)
    for attempt in (1, 2):
        try:
            return measure(ws, baseline_binary(ws, state, main_head), built, progress=measure_progress)
        except BinaryChanged as changed:
            if changed.role != "baseline" or attempt == 2:
                return str(changed)
    raise AssertionError("unreachable")


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
    assert judgment.base is not None

    def commit_step() -> dict[str, Any]:
        branch = f"lab/{name}"
        progress(f"{name}: commit on {branch}")
        checkout = landing_checkout(ws, name, judgment.base or "", judgment, hypothesis)
        commit = _commit_branch(ws, checkout, branch, lab_note(hypothesis, judgment, name))
        state.update_experiment(name, branch=branch, land_commit=commit, status=ExperimentStatus.LANDING)
        return {"branch": branch, "commit": commit}

    landed = steps.run("land", commit_step)

    def rebase_step() -> dict[str, Any]:
        main_head = pins.check(ws, state, main).head
        if main_head == judgment.base:
            return {"needed": False, "main": main_head, **landed}
        progress(f"{name}: main moved ({(judgment.base or '')[:10]} -> {main_head[:10]}): rebase and judge again")
        assert record.candidate is not None
        judged = replace(record.candidate, patch=judgment.patch, flags=[])  # what was judged, nothing else
        rebased = judge(ws, state, f"{name}-on-{main_head[:10]}", judged, main_head,
                        record.bench_base, progress=progress, measure_progress=measure_progress)
        data: dict[str, Any] = {"needed": True, "main": main_head, "onto": main_head, "decision": rebased.decision,
                                "reasons": rebased.reasons, "judgment": rebased.to_dict()}
        if rebased.decision != Decision.LAND:
            return {**data, **landed}
        branch = f"{landed['branch']}-on-{main_head[:10]}"
        checkout = landing_checkout(ws, f"{name}-on-{main_head[:10]}", main_head, rebased, hypothesis)
        commit = _commit_branch(ws, checkout, branch, lab_note(hypothesis, rebased, name))
        state.update_experiment(name, branch=branch, land_commit=commit, judgment=rebased)
        return {**data, "branch": branch, "commit": commit}

    rebase = steps.run("rebase", rebase_step)
    branch, commit = rebase["branch"], rebase["commit"]

    def push_step() -> dict[str, Any]:
        check_published(ws, state, where)
        if vcs.resolve(reference, branch) != commit:
            raise LabIntegrityError(f"{branch} in the lab's target clone is not the commit the lab made "
                                    f"({commit[:12]}): someone moved it; nothing was pushed or merged")
        return push(ws, branch)

    pushed = steps.run("push", push_step)
    notes = [] if pushed["reachable"] else [f"branch {branch} not published to the target: {pushed.get('error')}"]
    if rebase.get("decision", Decision.LAND) != Decision.LAND:
        notes.append(f"not merged: on the new main {rebase['main'][:10]} it no longer lands "
                     f"({'; '.join(rebase['reasons'])})")
        return LandOutcome(branch, commit, False, None, False, notes)
    current = judgment if not rebase["needed"] else Judgment.from_dict(rebase["judgment"])
    main_head = rebase["main"]

    def confirm_step() -> dict[str, Any]:
        progress(f"{name}: confirmation verdict on fresh samples")
        verdict = _confirm(ws, state, main_head, current, name, hypothesis, measure_progress)
        return {"refused": verdict} if isinstance(verdict, str) else {"verdict": verdict.to_dict()}

    confirmed = steps.run("confirm", confirm_step)
    if "refused" in confirmed:
        notes.append(f"not merged: {confirmed['refused']}; the branch stays, described")
        return LandOutcome(branch, commit, False, None, False, notes)
    confirm = Verdict.from_dict(confirmed["verdict"])
    if confirm.verdict != VerdictWord.PASS:
        notes.append(f"not merged: the confirmation verdict was {confirm.verdict} "
                     f"({'; '.join(confirm.reasons)}); the branch stays, described")
        return LandOutcome(branch, commit, False, None, False, notes)

    def merge_step() -> dict[str, Any]:
        if vcs.contains(reference, commit, main):  # merged before a kill, not yet recorded
            return {"branch": branch, "into": main, "commit": vcs.resolve(reference, main), "previous": main_head,
                    "note": "found merged after a restart"}
        progress(f"{name}: merge {branch} into {main}")
        pins.expect(ws, state, main, (main_head, commit), commit)
        merged = vcs.merge(reference, commit, into=main, message=f"lab: merge {branch}: {title}\n")
        pins.pin(ws, state, main)
        return {"branch": branch, "into": main, "commit": merged, "previous": main_head}

    merge_commit = steps.run("merge", merge_step)["commit"]
    pins.check(ws, state, main)
    state.update_experiment(name, merge_commit=merge_commit)
    check_published(ws, state, where)
    published = steps.run("publish", lambda: push(ws, main, where.ref))
    if not published["reachable"]:
        notes.append(f"merged in the lab's clone as {merge_commit[:10]} but NOT reachable in {where.repo}: "
                     f"{published.get('error')}")

    def check_step() -> dict[str, Any]:
        progress(f"{name}: main after the merge against the previous main")
        check = measure(ws, baseline_binary(ws, state, main_head), baseline_binary(ws, state, merge_commit),
                        progress=measure_progress)
        before, after = check.medians()
        regressed = check.verdict in (VerdictWord.REGRESSED, VerdictWord.ERROR)
        if not regressed:
            state.add_measurement("main", merge_commit, after, name)
        return {"verdict": check.to_dict(), "regressed": regressed, "before": before}

    checked = steps.run("main-check", check_step)
    pins.check(ws, state, main)
    if not checked["regressed"]:
        return LandOutcome(branch, commit, True, merge_commit, False, notes, bool(published["reachable"]))

    def revert_step() -> dict[str, Any]:
        head = vcs.resolve(reference, main)
        if head != merge_commit:  # reverted before a kill, not yet recorded (pins.check took it as announced)
            revert = head
        else:
            pins.expect(ws, state, main, (merge_commit,), main_head)
            revert = vcs.revert(reference, merge_commit, f"lab: revert {branch}: main regressed after the merge\n")
            pins.pin(ws, state, main)
        state.add_measurement("main", revert, checked["before"], name)
        return {"merge": merge_commit, "revert": revert, "verdict": checked["verdict"]["verdict"],
                "why": "main measured against the previous main regressed after the merge"}

    steps.run("revert", revert_step)
    check_published(ws, state, where)
    steps.run("publish-revert", lambda: push(ws, main, where.ref))
    notes.append(f"merged, then reverted: main after the merge was {checked['verdict']['verdict']}")
    return LandOutcome(branch, commit, True, merge_commit, True, notes, bool(published["reachable"]))

