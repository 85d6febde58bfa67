"""Landing a win: a described commit on `lab/<experiment>`, then maybe main.

The commit carries a lab note (hypothesis, result, numbers, n, floor) and is
pushed as its own branch whatever happens next. It is merged into main only
when the verdict is PASS and every test is green, and only after:

- a rebase when main moved since the experiment's base: the patch is applied
  to the new main and judged again from clean (a conflict or a lost win
  keeps the branch unmerged);
- a confirmation verdict on fresh samples, against lucky winners.

After the merge, main is measured against the previous main; a combined
regression reverts the merge, and the journal says why. Every step records
its result in lab.db first, so a lab killed half-way resumes without
landing anything twice.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from orchard.lab.builds import baseline_binary
from orchard.lab.experiment import ExperimentStatus
from orchard.lab.hypothesis import Hypothesis
from orchard.lab.judge import judge
from orchard.lab.judgment import Decision, Judgment
from orchard.lab.vcs import VcsError
from orchard.lab.verdicts import MeasureProgress, VerdictWord, measure
from orchard.lab.workspace import Workspace

if TYPE_CHECKING:
    from orchard.lab.state import ExperimentRecord, LabState

Progress = Callable[[str], None]


@dataclass
class LandOutcome:
    branch: str
    commit: str
    merged: bool
    merge_commit: str | None
    reverted: bool
    notes: list[str]


def _signed(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:+.2%}"


def lab_note(hypothesis: Hypothesis, judgment: Judgment, experiment: str) -> str:
    """The commit message: what was tried, what came out, with the numbers."""
    verdict = judgment.verdict
    result = "?" if verdict is None else f"{verdict.verdict} after {verdict.pairs} pairs (seed {verdict.seed})"
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
    lines += ["", "Checks: " + "; ".join(f"{c.name} {'ok' if c.passed else 'FAILED'}" for c in judgment.checks)]
    return "\n".join(lines) + "\n"


def main_branch(ws: Workspace, state: LabState) -> str:
    """The branch the lab integrates on, recorded at the lab's start."""
    name = state.meta("main_branch")
    if name is None:
        name = ws.target_vcs.current_branch(ws.reference_target) or "main"
        state.set_meta("main_branch", name)
    return name


def _publish(ws: Workspace, state: LabState, branch: str, experiment: str) -> str | None:
    """Push a branch from the lab's target clone to the target's own remote; a refusal is journaled."""
    try:
        ws.target_vcs.push(ws.reference_target, branch)
        return None
    except VcsError as error:
        note = f"push of {branch} to the target's remote refused: {str(error)[:300]}"
        state.log("push-refused", {"branch": branch, "error": str(error)[:500]}, experiment)
        return note


def _commit_branch(ws: Workspace, checkout: str, branch: str, base: str, message: str) -> str:
    """Commit the checkout's change on `branch` and push it into the lab's target clone.

    A lab killed after the commit but before recording it finds the commit
    already there and only pushes it again.
    """
    vcs, path = ws.target_vcs, Path(checkout)
    if vcs.current_branch(path) == branch and vcs.head(path) != base:
        commit = vcs.head(path)
    else:
        commit = vcs.commit(path, message, branch=branch)
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
    notes: list[str] = []
    branch = record.branch or f"lab/{name}"
    vcs, reference = ws.target_vcs, ws.reference_target
    assert judgment.checkout is not None and judgment.base is not None

    # 1. the described branch (skipped when a previous run already made it)
    commit = record.land_commit
    if commit is None or not vcs.contains(reference, commit, branch):
        progress(f"{name}: commit on {branch}")
        commit = _commit_branch(ws, judgment.checkout, branch, judgment.base,
                                lab_note(hypothesis, judgment, name))
        state.update_experiment(name, branch=branch, land_commit=commit, status=ExperimentStatus.LANDING)
        state.log("land", {"branch": branch, "commit": commit}, name)
    if (refused := _publish(ws, state, branch, name)) is not None:
        notes.append(refused)

    main = main_branch(ws, state)
    if vcs.contains(reference, commit, main):
        # a run killed after the merge but before recording it: the merge stands
        merge_commit = record.merge_commit or vcs.resolve(reference, main)
        state.log("merge", {"branch": branch, "into": main, "commit": merge_commit,
                            "note": "found merged after a restart; main was not re-checked"}, name)
        return LandOutcome(branch, commit, True, merge_commit, False, ["merged before a restart"])
    main_head = vcs.resolve(reference, main)

    # 2. main moved: the patch on the new main, judged again from clean
    current = judgment
    if main_head != judgment.base:
        progress(f"{name}: main moved ({judgment.base[:10]} -> {main_head[:10]}): rebase and judge again")
        assert record.candidate is not None
        rebased = judge(ws, state, f"{name}-on-{main_head[:10]}", replace(record.candidate, flags=[]), main_head,
                        record.bench_base, progress=progress, measure_progress=measure_progress)
        state.log("rebase", {"onto": main_head, "decision": rebased.decision, "reasons": rebased.reasons,
                             "verdict": None if rebased.verdict is None else rebased.verdict.to_dict()}, name)
        if rebased.decision != Decision.LAND:
            notes.append(f"not merged: on the new main {main_head[:10]} it no longer lands "
                         f"({'; '.join(rebased.reasons)})")
            return LandOutcome(branch, commit, False, None, False, notes)
        branch = f"{branch}-on-{main_head[:10]}"
        commit = _commit_branch(ws, rebased.checkout or "", branch, main_head,
                                lab_note(hypothesis, rebased, name))
        state.update_experiment(name, branch=branch, land_commit=commit, judgment=rebased)
        _publish(ws, state, branch, name)
        current = rebased

    # 3. a confirmation verdict on fresh samples guards against a lucky winner
    progress(f"{name}: confirmation verdict on fresh samples")
    baseline = baseline_binary(ws, state, main_head)
    confirm = measure(ws, baseline, Path(current.binary or ""), progress=measure_progress)
    state.log("confirm", {"verdict": confirm.to_dict()}, name)
    if confirm.verdict != VerdictWord.PASS:
        notes.append(f"not merged: the confirmation verdict was {confirm.verdict} "
                     f"({'; '.join(confirm.reasons)}); the branch stays, described")
        return LandOutcome(branch, commit, False, None, False, notes)

    # 4. merge, publish, then re-check main against the previous main
    progress(f"{name}: merge {branch} into {main}")
    merge_commit = vcs.merge(reference, branch, into=main, message=f"lab: merge {branch}: {title}\n")
    state.update_experiment(name, merge_commit=merge_commit)
    state.log("merge", {"branch": branch, "into": main, "commit": merge_commit}, name)
    if (refused := _publish(ws, state, main, name)) is not None:
        notes.append(refused)
    progress(f"{name}: main after the merge against the previous main")
    new_main = baseline_binary(ws, state, merge_commit)
    check = measure(ws, baseline, new_main, progress=measure_progress)
    before, after = check.medians()
    if check.verdict in (VerdictWord.REGRESSED, VerdictWord.ERROR):
        revert = vcs.revert(reference, merge_commit, f"lab: revert {branch}: main regressed after the merge\n")
        state.log("revert", {"merge": merge_commit, "revert": revert, "verdict": check.to_dict(),
                             "why": "main measured against the previous main regressed after the merge"}, name)
        _publish(ws, state, main, name)
        state.add_measurement("main", revert, before, name)
        notes.append(f"merged, then reverted: main after the merge was {check.verdict}")
        return LandOutcome(branch, commit, True, merge_commit, True, notes)
    state.add_measurement("main", merge_commit, after, name)
    state.log("main-check", {"verdict": check.to_dict()}, name)
    return LandOutcome(branch, commit, True, merge_commit, False, notes)
