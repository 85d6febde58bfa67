"""The judge: the lab's own verdict on a candidate, never the worker's numbers.

For each finished candidate, from a clean checkout of its base plus its
patch (in `judge/<experiment>/target`): the collection checks (harness
untouched, scope kept), build, the target's tests, the bench's own tests,
then the bench's verdict against the baseline binary built from the same
base, gates included. The hard rules of the seed are enforced here, each
with its own reason, and `decide` turns the findings into LAND, KILL or
ITERATE. Building is `workers/builds`' job, measuring `judge/measuring`'.

A worker that did not finish (timed out, cancelled, crashed, or ended with
no report) is never judged: its half-made change is KILLed with how it
ended as the reason. A binary that changed after the judge built it is a
KILL too ("judge binary changed"); a baseline that did is built again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from orchard.lab.judge import plausibility, review, weakened
from orchard.lab.judge.measuring import (
    BinaryChanged,
    MeasureProgress,
    Verdict,
    VerdictWord,
    assert_bench_untouched,
    measure,
    plausible_bound,
)
from orchard.lab.records.build import BuiltBinary, Check
from orchard.lab.records.candidate import Candidate, Flag
from orchard.lab.records.judgment import Decision, Judgment, Rule, patch_digest
from orchard.lab.text import a_few
from orchard.lab.workers.builds import (
    baseline_binary,
    candidate_step,
    checkout_with_patch,
    harness_tests,
    hash_build,
    placeholders,
)
from orchard.lab.workers.vcs import VcsError
from orchard.lab.workers.workspace import Workspace

if TYPE_CHECKING:
    from orchard.lab.db.state import LabState

Progress = Callable[[str], None]


def _promising(verdict: Verdict) -> bool:
    """An unclear verdict worth another try: a target's estimate beyond its floor on the good side."""
    for m in verdict.metrics:
        if not m.target or m.effect is None:
            continue
        good = -m.effect if m.direction == "lower" else m.effect
        if good > m.floor:
            return True
    return False


TESTS_RED = ("tests failed", "bench-tests failed")  # red tests beside a win: worth fixing, not killing
# How a worker may end without finishing, in the words its reason uses.
UNFINISHED = {Flag.TIMED_OUT: "timed out", Flag.CANCELLED: "cancelled", Flag.EXIT_NONZERO: "exited non-zero",
              Flag.REPORT_MISSING: "wrote no report"}


def _failures(checks: Sequence[Check], verdict: Verdict | None,
              flags: Sequence[str]) -> list[tuple[str, Rule | None]]:
    """Every failed check as (reason, rule), in the order of docs/loop.md's rules."""
    by_name = {check.name: check for check in checks}

    def failed(name: str) -> Check | None:
        check = by_name.get(name)
        return check if check is not None and not check.passed else None

    found: list[tuple[str, Rule | None]] = []
    if (check := failed("worker")) is not None:
        found.append((f"the worker did not finish: {check.detail}; its change is not judged", None))
    if (check := failed("harness")) is not None:
        found.append((f"harness tampered: {check.detail}; the experiment is void", Rule.HARNESS))
    if (check := failed("scope")) is not None:
        found.append((f"left its scope: {check.detail}", Rule.SCOPE))
    found += [(f"weakened tests: {c.detail}", Rule.TESTS_KEPT)
              for c in (failed(weakened.NAME), failed(weakened.COUNT_NAME)) if c is not None]
    if (check := failed("patch")) is not None:
        found.append((f"change refused: {check.detail}", None))
    if Flag.NO_CHANGES in flags:
        found.append(("the worker changed nothing", None))
    if (check := failed("apply")) is not None:
        found.append((f"the patch does not apply to a clean base: {check.detail}", None))
    if (check := failed("build")) is not None:
        found.append((f"does not build from clean: {check.detail}", Rule.TESTS))
    found += [(f"{c.name} failed: {c.detail}", Rule.TESTS) for c in (failed("tests"), failed("bench-tests"))
              if c is not None]  # each starts with one of TESTS_RED
    if verdict is None:
        return found
    reasons = list(verdict.reasons)
    if verdict.verdict == VerdictWord.ERROR:
        rule = Rule.COMPARABLE if any("not comparable" in r for r in reasons) else None
        found.append(("the verdict could not compare: " + "; ".join(reasons), rule))
    elif verdict.verdict == VerdictWord.REGRESSED:
        gates = verdict.failed_gates
        found += [(f"quality gate {g.name} failed ({g.detail}): REGRESSED whatever the metrics say", Rule.GATES)
                  for g in gates]
        if not gates:
            found.append(("REGRESSED: " + "; ".join(reasons), None))
    if (check := failed(plausibility.NAME)) is not None:
        found.append((f"implausible: {check.detail}", Rule.PLAUSIBLE))
    if (check := failed(review.NAME)) is not None:
        found.append((f"review rejected: {check.detail}", Rule.REVIEW))
    return found


def decide(checks: Sequence[Check], verdict: Verdict | None, flags: Sequence[str]) -> Judgment:
    """The hard rules, in order: the first that applies decides, and every failed check is a reason."""
    failures = _failures(checks, verdict, flags)
    reasons = [reason for reason, _ in failures]
    outcome = None if verdict is None else verdict.verdict
    if failures:
        if outcome == VerdictWord.PASS and all(reason.startswith(TESTS_RED) for reason in reasons):
            return Judgment(Decision.ITERATE,
                            ["a measured win, but " + "; ".join(reasons) + ": fix correctness and retry"], Rule.TESTS)
        if outcome in (VerdictWord.PASS, VerdictWord.NO_CHANGE, VerdictWord.INCONCLUSIVE):
            reasons.append(f"verdict {outcome}")
        return Judgment(Decision.KILL, reasons, failures[0][1])
    if verdict is None:
        return Judgment(Decision.KILL, ["no verdict could be taken"])
    reasons = list(verdict.reasons)
    if outcome == VerdictWord.PASS:
        flagged = [f"flagged implausible: {c.detail}" for c in checks if c.name == plausibility.NAME]
        return Judgment(Decision.LAND, reasons + flagged)
    if outcome == VerdictWord.NO_CHANGE:
        return Judgment(Decision.KILL, ["no effect beyond the noise floor: " + "; ".join(reasons)], Rule.FLOOR)
    if _promising(verdict):
        return Judgment(Decision.ITERATE, ["promising but unclear: " + "; ".join(reasons)])
    return Judgment(Decision.KILL, ["below the printed noise floor: " + "; ".join(reasons)], Rule.FLOOR)


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
    unfinished = [why for flag, why in UNFINISHED.items() if flag in candidate.flags]
    return [
        Check("harness", not tampered, f"bench clone changed: {changed}" if tampered else "bench clone unchanged"),
        Check("scope", not violations,
              f"files outside {candidate.scope or 'the scope'}: {a_few(violations)}" if violations
              else "every change inside the scope"),
        Check("patch", not refusals,
              " and ".join(refusals) + ": build outputs belong in the target's .gitignore or [target] ignore"
              if refusals else f"{size_kb:,.0f} KB, text only"),
        weakened.check(candidate.patch),
        Check("worker", not unfinished, " and ".join(unfinished) + _agent_said(candidate) if unfinished
              else "finished with a report"),
    ]


def judge(
    ws: Workspace,
    state: LabState,
    name: str,
    candidate: Candidate,
    base: str,
    bench_base: str,
    *,
    progress: Progress = lambda _: None,
    measure_progress: MeasureProgress | None = None,
) -> Judgment:
    """Judge one candidate end to end (idempotent: everything is rebuilt from clean)."""
    checks = collection_checks(candidate)
    flags = list(candidate.flags)
    if not all(c.passed for c in checks) or Flag.NO_CHANGES in flags:
        return _finish(decide(checks, None, flags), checks, None, None, base)
    directory = ws.judge_dir / name / "target"
    logs = ws.judge_dir / name / "logs"
    progress(f"{name}: clean checkout of {base[:12]} plus the patch")
    try:
        checkout = checkout_with_patch(ws, directory, base, candidate.patch)
        checks.append(Check("apply", True, "patch applies to a clean base"))
    except VcsError as error:
        checks.append(Check("apply", False, str(error)[:300]))
        return _finish(decide(checks, None, flags), checks, None, None, base)
    binary = ws.binary_in(checkout)
    values = placeholders(ws, checkout, binary)
    progress(f"{name}: build")
    checks.append(candidate_step(ws, "build", ws.config.target.build, checkout, values, logs))
    if not checks[-1].passed:
        return _finish(decide(checks, None, flags), checks, str(checkout), None, base)
    progress(f"{name}: target tests")
    checks.append(candidate_step(ws, "tests", ws.config.target.test, checkout, values, logs))
    if ws.config.target.test_count:
        progress(f"{name}: counting the tests against the base")
        checks.append(weakened.count_check(ws, state, base, checkout, values, logs))
    progress(f"{name}: bench tests")
    checks.append(harness_tests(ws, state, bench_base, values, logs))
    assert_bench_untouched(ws, bench_base)
    baseline = baseline_binary(ws, state, base)
    if binary is None or not binary.exists():
        checks.append(Check("binary", False, f"the build made no binary at {ws.config.target.binary}"))
        return _finish(Judgment(Decision.KILL, [checks[-1].detail]), checks, str(checkout), None, base)
    built = hash_build(binary)
    progress(f"{name}: verdict against the baseline built from {base[:12]}")
    try:
        try:
            verdict = measure(ws, baseline, built, progress=measure_progress)
        except BinaryChanged as changed:
            if changed.role != "baseline":
                raise
            progress(f"{name}: {changed}; the baseline is built again and measured again")
            verdict = measure(ws, baseline_binary(ws, state, base), built, progress=measure_progress)
    except BinaryChanged as changed:
        checks.append(Check("binary", False, str(changed)))
        return _finish(Judgment(Decision.KILL, [str(changed)]), checks, str(checkout), None, base)
    assert_bench_untouched(ws, bench_base)
    if (plausible := plausibility.check(verdict, plausible_bound(ws))) is not None:
        checks.append(plausible)
    judgment = decide(checks, verdict, flags)
    if judgment.decision == Decision.LAND and review.configured(ws):
        progress(f"{name}: review")
        hypothesis = state.hypothesis(state.experiment(candidate.experiment).hypothesis).hypothesis
        experiment = review.experiment_for(name, hypothesis, candidate, ws)
        checks.append(review.review(ws, experiment, candidate, verdict, checks, checkout))
        judgment = decide(checks, verdict, flags)
    judgment = _finish(judgment, checks, str(checkout), verdict, base, built)
    judgment.patch, judgment.patch_sha256 = candidate.patch, patch_digest(candidate.patch)
    return judgment


def _finish(judgment: Judgment, checks: list[Check], checkout: str | None, verdict: Verdict | None,
            base: str, built: BuiltBinary | None = None) -> Judgment:
    judgment.checks = checks
    judgment.checkout = checkout
    judgment.verdict = verdict
    judgment.base = base
    judgment.binary = None if built is None else str(built.path)
    judgment.built = built
    return judgment
