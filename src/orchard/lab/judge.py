"""The judge: the lab's own verdict on a candidate, never the worker's numbers.

For each finished candidate, from a clean checkout of its base plus its
patch (in `judge/<experiment>/target`): the collection checks (harness
untouched, scope kept), build, the target's tests, the bench's own tests,
then `orchard.bench`'s verdict from the lab's bench against the baseline
binary built from the same base (cached by commit), gates included. The
hard rules of the seed are enforced here, each with its own reason, and
`decide` turns the findings into LAND, KILL or ITERATE.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from orchard import bench
from orchard.bench.display import verdict_json
from orchard.bench.lock import MeasurementLock
from orchard.bench.runner import run
from orchard.errors import OrchardError
from orchard.lab.candidate import BINARY_FILES, PATCH_TOO_LARGE, a_few
from orchard.lab.experiment import render_command
from orchard.lab.state import LabState
from orchard.lab.vcs import VcsError
from orchard.lab.workspace import Workspace

LAND, KILL, ITERATE = "LAND", "KILL", "ITERATE"
STEP_TIMEOUT_S = 3600.0

# The hard rules, by the name their reason strings carry.
RULE_HARNESS = "harness-untouched"
RULE_SCOPE = "scope-kept"
RULE_TESTS = "tests-green"
RULE_GATES = "gates-absolute"
RULE_FLOOR = "no-claim-below-floor"
RULE_COMPARABLE = "comparable-rows-only"

Progress = Callable[[str], None]


class LabIntegrityError(OrchardError):
    """The lab's own bench clone changed: no verdict from it can be trusted."""


@dataclass
class Check:
    name: str
    passed: bool
    detail: str
    log: str | None = None


@dataclass
class Judgment:
    decision: str
    reasons: list[str]
    rule: str | None = None  # the hard rule that decided, if one did
    checks: list[Check] = field(default_factory=list)
    verdict: dict[str, Any] | None = None
    checkout: str | None = None  # judge checkout holding base + patch (kept for LAND)
    binary: str | None = None
    base: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def judgment_from(data: Mapping[str, Any]) -> Judgment:
    """A judgment as lab.db stores it (`Judgment.to_dict`), read back."""
    checks = [Check(**c) for c in data.get("checks", [])]
    return Judgment(**{**data, "checks": checks})


def placeholders(ws: Workspace, target_dir: Path, binary: Path | None) -> dict[str, str]:
    suite = ws.suite(ws.bench_dir)
    return {
        "target_dir": str(target_dir),
        "bench_dir": str(ws.bench_dir),
        "binary": str(binary or ""),
        "baseline": str(binary or ""),
        "suite": str(suite or ""),
        "report": "",
        "prompt_file": "",
        "experiment": target_dir.parent.name,
        "workspace": str(ws.root),
    }


def run_step(name: str, template: str, cwd: Path, placeholders: Mapping[str, str], log_dir: Path) -> Check:
    """Run one configured shell command; its whole output goes to a log file."""
    if not template:
        return Check(name, True, "not configured")
    command = render_command(template, dict(placeholders))
    capture = run(["bash", "-c", command], cwd=cwd, env=dict(os.environ), timeout_s=STEP_TIMEOUT_S,
                  admitted_chars=1 << 30)
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{name}.log"
    log.write_bytes(b"$ " + command.encode() + b"\n" + capture.stdout + capture.stderr)
    if capture.ok:
        return Check(name, True, f"`{command}` passed", str(log))
    what = "timed out" if capture.timed_out else f"exit {capture.returncode}"
    tail = (capture.stderr_text or capture.stdout_text).strip().splitlines()[-1:] or [""]
    return Check(name, False, f"`{command}` failed ({what}): {tail[0][:200]}", str(log))


def harness_tests(ws: Workspace, state: LabState, bench_base: str, values: Mapping[str, str],
                  log_dir: Path) -> Check:
    """The bench's own test suite, run once per bench base and rendered command.

    The lab's bench clone cannot change (it is checked around every verdict),
    so the same command at the same base gives the same answer: a pass is
    recorded in lab.db and reused, not run again for every candidate (a
    failure is run again: its cause may be outside the clone).
    """
    command = render_command(ws.config.bench.test, dict(values)) if ws.config.bench.test else ""
    key = "harness-tests:" + hashlib.sha256(f"{bench_base}\0{command}".encode()).hexdigest()[:16]
    recorded = state.meta(key)
    if recorded is not None:
        return Check(**json.loads(recorded))
    check = run_step("bench-tests", ws.config.bench.test, ws.bench_dir, values, log_dir)
    if check.passed:
        state.set_meta(key, json.dumps(asdict(check)))
    return check


def checkout_with_patch(ws: Workspace, directory: Path, base: str, patch: str) -> Path:
    """A clean clone of the lab's target at `base`, with `patch` applied."""
    if directory.exists():
        shutil.rmtree(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    ws.target_vcs.clone(str(ws.reference_target), directory, commit=base)
    # what the judge's build writes here must never be committed when the win lands
    ws.target_vcs.ignore_locally(directory, ws.config.target.ignore)
    if patch:
        ws.target_vcs.apply(directory, patch)
    return directory


def binary_in(ws: Workspace, checkout: Path) -> Path | None:
    return checkout / ws.config.target.binary if ws.config.target.binary else None


def baseline_binary(ws: Workspace, state: LabState, commit: str) -> Path:
    """The binary built from `commit`, built once and cached by commit."""
    cached = state.baseline(commit)
    if cached and Path(cached).exists():
        return Path(cached)
    checkout = checkout_with_patch(ws, ws.baseline_dir(commit), commit, "")
    check = run_step("build", ws.config.target.build, checkout, placeholders(ws, checkout, None),
                     checkout.parent / "logs")
    binary = binary_in(ws, checkout)
    if not check.passed or binary is None or not binary.exists():
        raise OrchardError(f"the baseline at {commit[:12]} does not build: {check.detail}")
    state.add_baseline(commit, str(binary))
    return binary


def assert_bench_untouched(ws: Workspace, bench_base: str) -> None:
    """Hard rule: the lab's own bench clone is never modified (else nothing it says counts)."""
    changes = ws.bench_vcs.changes(ws.bench_dir, bench_base)
    if changes.files or changes.head != bench_base:
        raise LabIntegrityError(
            f"the lab's bench clone {ws.bench_dir} differs from {bench_base[:12]} "
            f"({a_few(changes.files) or 'head moved'}): fix it by hand; no verdict was taken"
        )


VERDICT_WORDS = re.compile(r"\b(PASS|REGRESSED|NO-CHANGE|INCONCLUSIVE)\b")


def external_verdict(ws: Workspace, baseline: Path, candidate: Path) -> dict[str, Any]:
    """Run the bench's own verdict script under the lock; record its output, map its result.

    A JSON object with a `verdict` key on stdout is taken as it is (metrics
    and gates in orchard's shape are kept); otherwise the last verdict word
    the script printed decides, and no word at all is INCONCLUSIVE.
    """
    values = placeholders(ws, ws.reference_target, candidate)
    values["baseline"] = str(baseline)
    command = render_command(ws.config.bench.verdict, values)
    lock = MeasurementLock(f"orchard lab verdict command ({ws.root.name})")
    with lock:
        capture = run(["bash", "-c", command], cwd=ws.bench_dir, env=dict(os.environ), timeout_s=STEP_TIMEOUT_S,
                      admitted_chars=1 << 24)
    text = capture.stdout_text
    parsed: dict[str, Any] = {}
    for line in reversed(text.strip().splitlines()):
        with contextlib.suppress(ValueError):
            candidate_json = json.loads(line)
            if isinstance(candidate_json, dict) and "verdict" in candidate_json:
                parsed = candidate_json
                break
    words = VERDICT_WORDS.findall(text)
    outcome = str(parsed.get("verdict") or (words[-1] if words else bench.INCONCLUSIVE))
    if outcome not in (bench.PASS, bench.REGRESSED, bench.NO_CHANGE, bench.INCONCLUSIVE):
        outcome = bench.INCONCLUSIVE
    reasons = list(parsed.get("reasons", [])) or [f"the bench's verdict command said {outcome}"
                                                  + ("" if words or parsed else " (it printed no verdict word)")]
    if not capture.ok and outcome == bench.PASS:
        outcome, reasons = bench.ERROR, [f"the verdict command failed ({capture.returncode}) yet printed PASS"]
    return {"verdict": outcome, "reasons": reasons, "metrics": parsed.get("metrics", []),
            "gates": parsed.get("gates", []), "source": "command", "command": command,
            "exit_code": capture.returncode, "output_tail": text[-4000:], "lock_wait_ms": lock.last_wait_ms,
            "baseline": str(baseline), "candidate": str(candidate), "pairs": parsed.get("pairs"),
            "seed": parsed.get("seed")}


def measure(
    ws: Workspace, baseline: Path, candidate: Path, *, runs: int | None = None, seed: int | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> dict[str, Any]:
    """The bench's verdict of `candidate` against `baseline`, as the JSON `orchard verdict --json` prints."""
    if ws.config.bench.verdict:
        return external_verdict(ws, baseline, candidate)
    suite_path = ws.suite(ws.bench_dir)
    if suite_path is None:
        raise OrchardError("bench.suite is not configured: the lab has nothing to judge with")
    suite = bench.load_suite(suite_path)
    result = bench.run_verdict(suite, baseline, candidate, runs=runs, seed=seed, results=ws.results_dir,
                               progress=progress or (lambda *_: None))
    return verdict_json(result, str(suite.path))


def metric_keys(ws: Workspace) -> list[str]:
    """The suite's metric keys (`scenario/metric`) a hypothesis may name; empty without a suite."""
    path = ws.suite(ws.bench_dir)
    return [spec.key for spec in bench.load_suite(path).metrics] if path is not None else []


def verdict_medians(verdict: Mapping[str, Any]) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """(baseline medians, candidate medians) per metric key of a verdict."""
    metrics = verdict.get("metrics", [])
    return ({m["key"]: m.get("baseline_median") for m in metrics},
            {m["key"]: m.get("candidate_median") for m in metrics})


def _promising(verdict: Mapping[str, Any]) -> bool:
    """An unclear verdict worth another try: a target's estimate beyond its floor on the good side."""
    for m in verdict.get("metrics", []):
        effect = m.get("effect")
        if not m.get("target") or effect is None:
            continue
        good = -effect if m.get("direction") == "lower" else effect
        if good > m.get("floor", 0.0):
            return True
    return False


TESTS_RED = ("tests failed", "bench-tests failed")  # red tests beside a win: worth fixing, not killing


def _failures(checks: Sequence[Check], verdict: Mapping[str, Any] | None,
              flags: Sequence[str]) -> list[tuple[str, str | None]]:
    """Every failed check as (reason, rule), in the order of docs/loop.md's rules."""
    by_name = {check.name: check for check in checks}

    def failed(name: str) -> Check | None:
        check = by_name.get(name)
        return check if check is not None and not check.passed else None

    found: list[tuple[str, str | None]] = []
    if (check := failed("harness")) is not None:
        found.append((f"harness tampered: {check.detail}; the experiment is void", RULE_HARNESS))
    if (check := failed("scope")) is not None:
        found.append((f"left its scope: {check.detail}", RULE_SCOPE))
    if (check := failed("patch")) is not None:
        found.append((f"change refused: {check.detail}", None))
    if "no-changes" in flags:
        found.append(("the worker changed nothing", None))
    if (check := failed("apply")) is not None:
        found.append((f"the patch does not apply to a clean base: {check.detail}", None))
    if (check := failed("build")) is not None:
        found.append((f"does not build from clean: {check.detail}", RULE_TESTS))
    found += [(f"{c.name} failed: {c.detail}", RULE_TESTS) for c in (failed("tests"), failed("bench-tests"))
              if c is not None]  # each starts with one of TESTS_RED
    if verdict is None:
        return found
    reasons = list(verdict.get("reasons", []))
    if verdict["verdict"] == bench.ERROR:
        rule = RULE_COMPARABLE if any("not comparable" in r for r in reasons) else None
        found.append(("the verdict could not compare: " + "; ".join(reasons), rule))
    elif verdict["verdict"] == bench.REGRESSED:
        gates = [g for g in verdict.get("gates", []) if not g["passed"]]
        found += [(f"quality gate {g['name']} failed ({g['detail']}): REGRESSED whatever the metrics say",
                   RULE_GATES) for g in gates]
        if not gates:
            found.append(("REGRESSED: " + "; ".join(reasons), None))
    return found


def decide(checks: Sequence[Check], verdict: Mapping[str, Any] | None, flags: Sequence[str]) -> Judgment:
    """The hard rules, in order: the first that applies decides, and every failed check is a reason."""
    failures = _failures(checks, verdict, flags)
    reasons = [reason for reason, _ in failures]
    outcome = None if verdict is None else verdict["verdict"]
    if failures:
        rule = failures[0][1]
        if outcome == bench.PASS and all(reason.startswith(TESTS_RED) for reason in reasons):
            return Judgment(ITERATE, ["a measured win, but " + "; ".join(reasons) + ": fix correctness and retry"],
                            RULE_TESTS)
        if outcome in (bench.PASS, bench.NO_CHANGE, bench.INCONCLUSIVE):
            reasons.append(f"verdict {outcome}")
        return Judgment(KILL, reasons, rule)
    if verdict is None:
        return Judgment(KILL, ["no verdict could be taken"])
    reasons = list(verdict.get("reasons", []))
    if outcome == bench.PASS:
        return Judgment(LAND, reasons)
    if outcome == bench.NO_CHANGE:
        return Judgment(KILL, ["no effect beyond the noise floor: " + "; ".join(reasons)], RULE_FLOOR)
    if _promising(verdict):
        return Judgment(ITERATE, ["promising but unclear: " + "; ".join(reasons)])
    return Judgment(KILL, ["below the printed noise floor: " + "; ".join(reasons)], RULE_FLOOR)


def collection_checks(candidate: Mapping[str, Any]) -> list[Check]:
    """What the candidate's collection already established."""
    bench_changes = candidate.get("bench_changes") or []
    tampered = "harness-tampered" in candidate.get("flags", [])
    violations = candidate.get("scope_violations") or []
    flags = candidate.get("flags", [])
    size_kb = (candidate.get("patch_bytes") or 0) / 1024
    refusals = []
    if BINARY_FILES in flags:
        refusals.append(f"binary files {a_few(candidate.get('binary_files') or [])}")
    if PATCH_TOO_LARGE in flags:
        refusals.append(f"a {size_kb:,.0f} KB patch over [target] max_patch_kb "
                        f"({a_few(candidate.get('changed_files') or [])})")
    return [
        Check("harness", not tampered,
              f"bench clone changed: {a_few(bench_changes) or 'its head moved'}" if tampered else "bench clone unchanged"),
        Check("scope", not violations,
              f"files outside {candidate.get('scope') or 'the scope'}: {a_few(violations)}" if violations
              else "every change inside the scope"),
        Check("patch", not refusals,
              " and ".join(refusals) + ": build outputs belong in the target's .gitignore or [target] ignore"
              if refusals else f"{size_kb:,.0f} KB, text only"),
    ]


def judge(
    ws: Workspace,
    state: LabState,
    name: str,
    candidate: Mapping[str, Any],
    base: str,
    bench_base: str,
    *,
    progress: Progress = lambda _: None,
    measure_progress: Callable[[int, int, str], None] | None = None,
) -> Judgment:
    """Judge one candidate end to end (idempotent: everything is rebuilt from clean)."""
    checks = collection_checks(candidate)
    flags = list(candidate.get("flags", []))
    early = decide(checks, None, flags) if not all(c.passed for c in checks) or "no-changes" in flags else None
    if early is not None:
        early.checks, early.base = checks, base
        return early
    directory = ws.judge_dir / name / "target"
    logs = ws.judge_dir / name / "logs"
    progress(f"{name}: clean checkout of {base[:12]} plus the patch")
    try:
        checkout = checkout_with_patch(ws, directory, base, candidate.get("patch", ""))
        checks.append(Check("apply", True, "patch applies to a clean base"))
    except VcsError as error:
        checks.append(Check("apply", False, str(error)[:300]))
        return _finish(decide(checks, None, flags), checks, None, None, base)
    binary = binary_in(ws, checkout)
    values = placeholders(ws, checkout, binary)
    progress(f"{name}: build")
    checks.append(run_step("build", ws.config.target.build, checkout, values, logs))
    if not checks[-1].passed:
        return _finish(decide(checks, None, flags), checks, str(checkout), None, base)
    progress(f"{name}: target tests")
    checks.append(run_step("tests", ws.config.target.test, checkout, values, logs))
    progress(f"{name}: bench tests")
    checks.append(harness_tests(ws, state, bench_base, values, logs))
    assert_bench_untouched(ws, bench_base)
    baseline = baseline_binary(ws, state, base)
    if binary is None or not binary.exists():
        checks.append(Check("binary", False, f"the build made no binary at {ws.config.target.binary}"))
        return _finish(Judgment(KILL, [checks[-1].detail]), checks, str(checkout), None, base)
    progress(f"{name}: verdict against the baseline built from {base[:12]}")
    verdict = measure(ws, baseline, binary, progress=measure_progress)
    assert_bench_untouched(ws, bench_base)
    return _finish(decide(checks, verdict, flags), checks, str(checkout), verdict, base, str(binary))


def _finish(judgment: Judgment, checks: list[Check], checkout: str | None, verdict: dict[str, Any] | None,
            base: str, binary: str | None = None) -> Judgment:
    judgment.checks = checks
    judgment.checkout = checkout
    judgment.verdict = verdict
    judgment.base = base
    judgment.binary = binary
    return judgment
