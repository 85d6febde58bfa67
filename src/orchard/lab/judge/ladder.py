"""The judge: the lab's own verdict on a candidate, never the worker's numbers.

For each finished candidate, from a clean checkout of its base plus its
patch (in `judge/<experiment>/target`): the collection checks (harness
untouched, scope kept), build, the target's tests, the bench's own tests,
then the bench's verdict against the baseline binary built from the same
base, gates included. The hard rules of the seed are enforced here, each
with its own reason, and `decide` turns the findings into LAND, KILL or
ITERATE. Building is `workers/workspace/builds`' job, measuring `judge/measuring`'.

A worker that did not finish (timed out, cancelled, crashed, or ended with
no report) is never judged: its half-made change is KILLed with how it
ended as the reason. A binary that changed after the judge built it is a
KILL too ("judge binary changed"); a baseline that did is built again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from orchard.lab.judge import differential, hack_review, plausibility, review, second_look, weakened
from orchard.lab.judge.measuring import (
    BinaryChanged,
    ClosedTree,
    MeasureProgress,
    Unjudged,
    Verdict,
    VerdictWord,
    assert_bench_untouched,
    measure,
    plausible_bound,
)
from orchard.lab.records.build import BuiltBinary, Check, CheckName
from orchard.lab.records.candidate import Candidate, Flag
from orchard.lab.records.hack_findings import Finding
from orchard.lab.records.judgment import Decision, Judgment, Rule, Ruling, patch_digest
from orchard.lab.text import a_few
from orchard.lab.workers.vcs import VcsError
from orchard.lab.workers.workspace.builds import (
    baseline_binary,
    candidate_step,
    checkout_with_patch,
    harness_tests,
    hash_build,
    placeholders,
)
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.limits import exit_hint

if TYPE_CHECKING:
    from orchard.lab.db.state import LabState

Progress = Callable[[str], None]


def _promising(verdict: Verdict) -> bool:
    """An unclear verdict worth another try: a target's estimate beyond its floor on the good side, and beyond half
    its minimum detectable effect. The floor is the A/A offset, not the machine's noise: on a loud machine a null
    effect's estimate wanders beyond it (-9.8% at load 17 for the demo's single-write, MDE 21.9%)."""
    return any(m.target and m.effect is not None and m.direction.gain(m.effect) > max(m.floor, (m.mde or 0.0) / 2)
               for m in verdict.metrics)


TESTS_RED = (CheckName.TESTS, CheckName.BENCH_TESTS)  # red tests beside a win: worth fixing, not killing
# How a worker may end without finishing, in the words its reason uses.
UNFINISHED = {Flag.TIMED_OUT: "timed out", Flag.CANCELLED: "cancelled", Flag.EXIT_NONZERO: "exited non-zero",
              Flag.REPORT_MISSING: "wrote no report"}
# A failed check as a reason, and the hard rule it breaks, in the order of docs/loop.md's rules: the checks of
# collection, then (after a change that changed nothing) those of the build, then (after the verdict) the last.
Stated = tuple[tuple[CheckName, str, Rule | None], ...]
COLLECTED: Stated = (
    (CheckName.WORKER, "the worker did not finish: {}; its change is not judged", None),
    (CheckName.HARNESS, "harness tampered: {}; the experiment is void", Rule.HARNESS),
    (CheckName.SCOPE, "left its scope: {}", Rule.SCOPE),
    (CheckName.TESTS_KEPT, "weakened tests: {}", Rule.TESTS_KEPT),
    (CheckName.TEST_COUNT, "weakened tests: {}", Rule.TESTS_KEPT),
    (CheckName.PATCH, "change refused: {}", Rule.ADMISSIBLE),
)
BUILT: Stated = (
    (CheckName.APPLY, "the patch does not apply to a clean base: {}", None),
    (CheckName.BUILD, "does not build from clean: {}", Rule.TESTS),
    (CheckName.TESTS, "tests failed: {}", Rule.TESTS),
    (CheckName.BENCH_TESTS, "bench-tests failed: {}", Rule.TESTS),
)
MEASURED: Stated = (
    (CheckName.PLAUSIBLE, "implausible: {}", Rule.PLAUSIBLE),
    (CheckName.HACK_REVIEW, "hack review: {}", Rule.HACK_REVIEW),
    (CheckName.DIFFERENTIAL, "{}", Rule.DIFFERENTIAL),
    (CheckName.REVIEW, "review rejected: {}", Rule.REVIEW),
)
BESIDE_A_WIN = {CheckName.PLAUSIBLE: "flagged implausible: ", CheckName.DIFFERENTIAL: "beyond the bench: ",
                CheckName.SECOND_LOOK: "second look: "}


@dataclass(frozen=True)
class Failure:
    """One reason a candidate does not land: in words, the hard rule it breaks, the check it comes from."""

    reason: str
    rule: Rule | None = None
    check: CheckName | None = None


def _failures(checks: Sequence[Check], verdict: Verdict | None, flags: Sequence[str]) -> list[Failure]:
    """Every failed check and the verdict's own failure, in the order of docs/loop.md's rules."""
    latest = {check.name: check for check in checks}
    failed = {name: check for name, check in latest.items() if not check.passed}

    def stated(rules: Stated) -> list[Failure]:
        return [Failure(text.format(failed[name].detail), rule, name) for name, text, rule in rules if name in failed]

    found = stated(COLLECTED)
    if Flag.NO_CHANGES in flags:
        found.append(Failure("the worker changed nothing"))
    found += stated(BUILT)
    if verdict is None:
        return found
    return found + _verdict_failures(verdict) + stated(MEASURED)


def _verdict_failures(verdict: Verdict) -> list[Failure]:
    """An ERROR (under its rule when the rows were not comparable) or a REGRESSED verdict, as failures."""
    reasons = "; ".join(verdict.reasons)
    if verdict.verdict == VerdictWord.ERROR:
        rule = Rule.COMPARABLE if verdict.unjudged == Unjudged.INCOMPARABLE_ROWS else None
        return [Failure("the verdict could not compare: " + reasons, rule)]
    if verdict.verdict == VerdictWord.REGRESSED:
        gates = [Failure(f"quality gate {g.name} failed ({g.detail}): REGRESSED whatever the metrics say", Rule.GATES)
                 for g in verdict.failed_gates]
        # a win that does not hold on the held-out variants fails the same held-out gate as one answered unlike them
        not_held = verdict.variants is not None and any(c.held is False for c in verdict.variants.checks)
        return gates or [Failure("REGRESSED: " + reasons, Rule.GATES if not_held else None)]
    return []


def decide(checks: Sequence[Check], verdict: Verdict | None, flags: Sequence[str]) -> Ruling:
    """The hard rules, in order: the first that applies decides, and every failed check is a reason."""
    failures = _failures(checks, verdict, flags)
    reasons = [failure.reason for failure in failures]
    outcome = None if verdict is None else verdict.verdict
    if failures:
        if outcome == VerdictWord.PASS and all(failure.check in TESTS_RED for failure in failures):
            return Ruling(Decision.ITERATE,
                          ("a measured win, but " + "; ".join(reasons) + ": fix correctness and retry",), Rule.TESTS)
        if outcome in (VerdictWord.PASS, VerdictWord.NO_CHANGE, VerdictWord.INCONCLUSIVE):
            reasons.append(f"verdict {outcome}")
        return Ruling(Decision.KILL, tuple(reasons), failures[0].rule)
    if verdict is None:
        return Ruling(Decision.KILL, ("no verdict could be taken",))
    said = "; ".join(verdict.reasons)
    if outcome == VerdictWord.PASS:
        flagged = [BESIDE_A_WIN[c.name] + c.detail for c in checks if c.name in BESIDE_A_WIN]
        return Ruling(Decision.LAND, (*verdict.reasons, *flagged))
    if outcome == VerdictWord.NO_CHANGE:
        return Ruling(Decision.KILL, (f"no effect beyond the noise floor: {said}",), Rule.FLOOR)
    if _promising(verdict):
        return Ruling(Decision.ITERATE, (f"promising but unclear, not landed: {said}",))
    return Ruling(Decision.KILL, (f"no effect shown beyond the printed noise floor: {said}",), Rule.FLOOR)


def _agent_said(candidate: Candidate) -> str:
    """The agent's own account of its end (a turn limit, a refusal), when it gave one."""
    return f" ({candidate.launcher_failure})" if candidate.launcher_failure else ""


def collection_checks(candidate: Candidate) -> list[Check]:
    """What the candidate's collection already established."""
    tampered = Flag.HARNESS_TAMPERED in candidate.flags
    violations = candidate.scope_violations
    changed = a_few(candidate.bench_changes) or "its head moved"
    size_kb = candidate.patch_bytes / 1024
    refusals = []
    if Flag.SPECIAL_FILES in candidate.flags:
        refusals.append(f"special files {a_few(candidate.special_files)}")
    if Flag.BINARY_FILES in candidate.flags:
        refusals.append(f"binary files {a_few(candidate.binary_files)}")
    if Flag.PATCH_TOO_LARGE in candidate.flags:
        refusals.append(f"a {size_kb:,.0f} KB patch over [target] max_patch_kb ({a_few(candidate.changed_files)})")
    if Flag.TOO_MANY_FILES in candidate.flags:
        refusals.append(f"{len(candidate.changed_files):,} files over [target] max_patch_files "
                        f"({a_few(candidate.changed_files)})")
    unfinished = [why + (exit_hint(candidate.exit_code) if flag == Flag.EXIT_NONZERO else "")
                  for flag, why in UNFINISHED.items() if flag in candidate.flags]
    return [
        Check(CheckName.HARNESS, not tampered,
              f"bench clone changed: {changed}" if tampered else "bench clone unchanged"),
        Check(CheckName.SCOPE, not violations,
              f"files outside {candidate.scope or 'the scope'}: {a_few(violations)}" if violations
              else "every change inside the scope"),
        Check(CheckName.PATCH, not refusals,
              " and ".join(refusals) + ": build outputs belong in the target's .gitignore or [target] ignore"
              if refusals else f"{size_kb:,.0f} KB, text only"),
        weakened.check(candidate.patch),
        Check(CheckName.WORKER, not unfinished, " and ".join(unfinished) + _agent_said(candidate) if unfinished
              else "finished with a report"),
    ]


def judge(ws: Workspace, state: LabState, name: str, candidate: Candidate, base: str, bench_base: str, *,
          progress: Progress = lambda _: None, measure_progress: MeasureProgress | None = None,
          measurer: Measurer = measure) -> Judgment:
    """Judge one candidate end to end (idempotent: everything is rebuilt from clean), timing its build and its
    measurement (what FINAL_REPORT's account of the lab's time adds up). `measurer` takes the verdict: the loop
    passes its `Gathering`'s, where candidates waiting on the same base are measured together."""
    clock = _Clock(measurer)
    judgment = _judge(ws, state, name, candidate, base, bench_base, clock, progress, measure_progress)
    return replace(judgment, build_s=round(clock.build_s, 3), measure_s=round(clock.measure_s, 3))


class Measurer(Protocol):
    """Who takes a verdict of (baseline, candidate): `measuring.measure`, or a `Gathering`'s."""

    def __call__(self, ws: Workspace, baseline: BuiltBinary, candidate: BuiltBinary, *,
                 progress: MeasureProgress | None = None) -> Verdict: ...


class _Clock:
    """Seconds the judge spent building and testing, and measuring, for one candidate (and who measures)."""

    def __init__(self, measurer: Measurer) -> None:
        self.build_s = 0.0
        self.measure_s = 0.0
        self.measurer = measurer


def _judge(ws: Workspace, state: LabState, name: str, candidate: Candidate, base: str, bench_base: str,
           clock: _Clock, progress: Progress, measure_progress: MeasureProgress | None) -> Judgment:
    checks = collection_checks(candidate)
    flags = list(candidate.flags)
    if not all(c.passed for c in checks) or Flag.NO_CHANGES in flags:
        return _finish(decide(checks, None, flags), checks, None, None, base, candidate)
    progress(f"{name}: clean checkout of {base[:12]} plus the patch")
    try:
        checkout = checkout_with_patch(ws, ws.judge_dir / name / "target", base, candidate.patch)
        checks.append(Check(CheckName.APPLY, True, "patch applies to a clean base"))
    except VcsError as error:
        checks.append(Check(CheckName.APPLY, False, str(error)[:300]))
        return _finish(decide(checks, None, flags), checks, None, None, base, candidate)
    binary = ws.binary_in(checkout)
    values = placeholders(ws, checkout, binary)
    started = time.monotonic()
    built_ok = _built_and_tested(ws, state, name, checkout, values, base, bench_base, checks, progress)
    clock.build_s = time.monotonic() - started
    if not built_ok:
        return _finish(decide(checks, None, flags), checks, str(checkout), None, base, candidate)
    baseline = baseline_binary(ws, state, base)
    if binary is None or not binary.exists():
        checks.append(Check(CheckName.BINARY, False, f"the build made no binary at {ws.config.target.binary}"))
        return _finish(Ruling(Decision.KILL, (checks[-1].detail,)), checks, str(checkout), None, base, candidate)
    built = hash_build(binary)
    progress(f"{name}: verdict against the baseline built from {base[:12]}")
    started = time.monotonic()
    try:
        verdict, looked = second_look.taken(lambda: _measured(ws, state, name, base, (baseline, built), progress,
                                                              measure_progress, clock.measurer),
                                            lambda line: progress(f"{name}: {line}"))
        checks += looked
    except (BinaryChanged, ClosedTree) as refused:
        checks.append(Check(CheckName.BINARY, False, str(refused)))
        rule = Rule.AS_BUILT if isinstance(refused, BinaryChanged) else Rule.OPEN_TREE
        return _finish(Ruling(Decision.KILL, (str(refused),), rule), checks, str(checkout), None, base, candidate)
    finally:
        clock.measure_s = time.monotonic() - started
    assert_bench_untouched(ws, bench_base)
    if (plausible := plausibility.check(verdict, plausible_bound(ws))) is not None:
        checks.append(plausible)
    ruling, findings = _win_checks(ws, state, name, candidate, checkout, (baseline, built), base, verdict, checks,
                                   progress)
    return replace(_finish(ruling, checks, str(checkout), verdict, base, candidate, built), findings=findings)


def _win_checks(ws: Workspace, state: LabState, name: str, candidate: Candidate, checkout: Path,
                binaries: tuple[BuiltBinary, BuiltBinary], base: str, verdict: Verdict, checks: list[Check],
                progress: Progress) -> tuple[Ruling, tuple[Finding, ...]]:
    """The ruling, after what only a win goes through, each while it still LANDs: its patch read for benchmark
    gaming (before anything else may land it), the wider inputs, the reviewer; their checks go into `checks`."""
    flags = list(candidate.flags)
    ruling = decide(checks, verdict, flags)
    findings: tuple[Finding, ...] = ()
    if ruling.decision == Decision.LAND:
        findings = tuple(hack_review.review(candidate.patch, hack_review.lab_facts(ws, checkout, candidate.patch)))
        checks.append(hack_review.check(findings))
        ruling = decide(checks, verdict, flags)
    if ruling.decision == Decision.LAND and differential.applies(ws):
        progress(f"{name}: baseline and candidate on inputs beyond the bench")
        checks.append(differential.check(ws, *binaries, base, _metric(state, candidate)))
        ruling = decide(checks, verdict, flags)
    if ruling.decision == Decision.LAND and review.configured(ws):
        progress(f"{name}: review")
        hypothesis = state.hypothesis(state.experiment(candidate.experiment).hypothesis).hypothesis
        experiment = review.experiment_for(name, hypothesis, candidate, ws)
        checks.append(review.review(ws, experiment, candidate, verdict, checks, checkout))
        ruling = decide(checks, verdict, flags)
    return ruling, findings


def _metric(state: LabState, candidate: Candidate) -> str:
    """The metric the candidate's hypothesis aims at; "" when it was judged outside an experiment (finalize's
    judging of a group of wins alone)."""
    try:
        return state.hypothesis(state.experiment(candidate.experiment).hypothesis).hypothesis.metric
    except KeyError:
        return ""


def _built_and_tested(ws: Workspace, state: LabState, name: str, checkout: Path, values: dict[str, str], base: str,
                      bench_base: str, checks: list[Check], progress: Progress) -> bool:
    """Build the candidate's checkout, then (when it built) run its tests, its test count and the bench's tests;
    every step's check goes into `checks`. False: it did not build."""
    logs = ws.judge_dir / name / "logs"
    progress(f"{name}: build")
    checks.append(candidate_step(ws, CheckName.BUILD, ws.config.target.build, checkout, values, logs))
    if not checks[-1].passed:
        return False
    progress(f"{name}: target tests")
    checks.append(candidate_step(ws, CheckName.TESTS, ws.config.target.test, checkout, values, logs))
    if ws.config.target.test_count:
        progress(f"{name}: counting the tests against the base")
        checks.append(weakened.count_check(ws, state, base, checkout, values, logs))
    progress(f"{name}: bench tests")
    checks.append(harness_tests(ws, state, bench_base, values, logs))
    assert_bench_untouched(ws, bench_base)
    return True


def _measured(ws: Workspace, state: LabState, name: str, base: str, binaries: tuple[BuiltBinary, BuiltBinary],
              progress: Progress, measure_progress: MeasureProgress | None, measurer: Measurer) -> Verdict:
    """The verdict of (baseline, candidate); a baseline that changed is built from `base` and measured again
    once, alone (`BinaryChanged` otherwise)."""
    baseline, built = binaries
    try:
        return measurer(ws, baseline, built, progress=measure_progress)
    except BinaryChanged as changed:
        if changed.role != "baseline":
            raise
        progress(f"{name}: {changed}; the baseline is built again and measured again")
        return measure(ws, baseline_binary(ws, state, base), built, progress=measure_progress)


def _finish(ruling: Ruling, checks: list[Check], checkout: str | None, verdict: Verdict | None,
            base: str, candidate: Candidate, built: BuiltBinary | None = None) -> Judgment:
    """The judgment, built once: the rules' ruling with its evidence and exactly the patch judged."""
    return Judgment(ruling.decision, ruling.reasons, ruling.rule, tuple(checks), verdict, checkout,
                    None if built is None else str(built.path), base, built, candidate.patch,
                    patch_digest(candidate.patch))
