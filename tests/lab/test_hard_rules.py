"""The judge's hard rules, each violated once and caught with its own reason.

Verdicts are really measured, in process as the judge takes them, on tiny subjects
(a rows suite whose metric is exact, so every outcome is certain) or, where
a real run cannot produce the outcome on demand (INCONCLUSIVE, a gate failure
beside measured wins), from the bench's own `overall()` and typed `Verdict`.
Checks come from real shell steps, candidates from real worker checkouts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from orchard.bench.campaigns.campaign import run_verdict
from orchard.bench.deciding.verdict import Unjudged, Verdict
from orchard.bench.suites.suite_reader import load_suite
from orchard.lab.config.sections import LauncherConfig
from orchard.lab.db.state import LabState
from orchard.lab.judge import ladder as judging
from orchard.lab.judge.candidate import collect_candidate
from orchard.lab.judge.ladder import decide
from orchard.lab.judge.measuring import BinaryChanged, ClosedTree, LabIntegrityError, assert_bench_untouched, measure
from orchard.lab.loop import backlog
from orchard.lab.records.build import BuiltBinary, Check, CheckName
from orchard.lab.records.candidate import Candidate
from orchard.lab.records.experiment import Experiment
from orchard.lab.records.hypothesis import Hypothesis, HypothesisStatus
from orchard.lab.records.judgment import Decision, Judgment, Rule
from orchard.lab.workers.jobs.job import JobResult
from orchard.lab.workers.launchers.launchers import make_launcher
from orchard.lab.workers.workspace import builds
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.lab_helpers import git
from tests.lab.loop_support import add_hypotheses, bare_candidate, metric, verdict_of, write_finished_report

SUITE = """
[suite]
name = "rules"
runs = 6
min_runs = 6
calibration_runs = 6

[[scenario]]
name = "task"
kind = "rows"
command = ["{bin}"]
where = { operation = "task.total" }

[[metric]]
name = "estimated_total_tokens"

[[metric]]
name = "oracle_passed"
compare = false

[[gate]]
kind = "no_drop"
metric = "oracle_passed"
"""

# name: (estimated tokens, oracle passed, remote transport); the baseline is `base`
SUBJECTS = {
    "base": (1200, "true", "local"),
    "same": (1200, "true", "local"),
    "lean": (900, "true", "local"),
    "fat": (1500, "true", "local"),
    "cheat": (300, "false", "local"),
    "networked": (1200, "true", "network"),
}


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Verdict]:
    """Each subject's verdict against `base`, really measured and taken in process, as the judge takes it
    (unconfined, as `orchard verdict --no-confine`: the rules are the point)."""
    root = tmp_path_factory.mktemp("verdicts")
    (root / "suite.toml").write_text(SUITE)
    for name, (tokens, oracle, transport) in SUBJECTS.items():
        row = json.dumps(
            {
                "operation": "task.total",
                "estimated_total_tokens": tokens,
                "oracle_passed": oracle == "true",
                "remote_transport": transport,
            }
        )
        (root / name).write_text(f"#!/bin/sh\necho '{row}'\n")
        (root / name).chmod(0o755)
    suite = replace(load_suite(root / "suite.toml"), confine=False)
    # the first calibrates; the others find its calibration cached (in the module's own cache)
    return {name: run_verdict(suite, root / "base", root / name, results=root / f"results-{name}")
            for name in SUBJECTS if name != "base"}


def step(tmp_path: Path, name: str, command: str) -> Check:
    """A real shell step, the way the judge runs build and tests."""
    return builds.run_step(name, command, tmp_path, {}, tmp_path / "logs")


@pytest.fixture
def green(tmp_path: Path) -> list[Check]:
    """Collection checks passed, the patch applied, build and both test suites green."""
    candidate = bare_candidate(scope=["src/a.py"])
    return [
        *judging.collection_checks(candidate),
        Check("apply", True, "patch applies to a clean base"),
        step(tmp_path, "build", "true"),
        step(tmp_path, "tests", "true"),
        step(tmp_path, "bench-tests", "true"),
    ]


def replaced(checks: list[Check], new: Check) -> list[Check]:
    return [new if check.name == new.name else check for check in checks]


# -- the verdicts the rules are judged on are the real ones ------------------------------------------


def test_the_real_verdicts_are_the_outcomes_the_rules_are_about(verdicts: dict[str, Verdict]) -> None:
    assert {name: v.verdict for name, v in verdicts.items()} == {
        "same": "NO-CHANGE",
        "lean": "PASS",
        "fat": "REGRESSED",
        "cheat": "REGRESSED",
        "networked": "ERROR",
    }
    assert verdicts["lean"].metrics[0].effect == pytest.approx(-0.25)
    assert verdicts["lean"].metrics[0].n >= 6


def test_green_checks_and_a_pass_land(green: list[Check], verdicts: dict[str, Verdict]) -> None:
    judgment = decide(green, verdicts["lean"], [])
    assert judgment.decision == Decision.LAND and judgment.rule is None
    assert list(judgment.reasons) == verdicts["lean"].reasons


# -- each rule, violated once ------------------------------------------------------------------------


@pytest.fixture
def lab(make_workspace: Callable[..., Workspace]) -> Iterator[tuple[Workspace, LabState]]:
    ws = make_workspace(
        '[target]\nbuild = "grep -q \'alpha 1\' src/alpha.txt"\ntest = "true"\nbinary = "src/alpha.txt"\n'
    )
    state = LabState.open(ws.root)
    yield ws, state
    state.close()


def judged_worker(
    lab: tuple[Workspace, LabState], name: str, scope: list[str], writes: dict[str, str],
    measurer: judging.Measurer = measure,
) -> tuple[Candidate, Judgment]:
    """A real worker checkout with `writes` made (paths under `target/` or `bench/`), collected as the
    lab collects it, then judged (its verdict taken by `measurer`)."""
    ws, state = lab
    checkout = ws.setup_worker("w1")
    for path, text in writes.items():
        (checkout.worker.root / path).write_text(text)
    write_finished_report(checkout.worker.report_path, name)
    log = ws.log_path(name)
    log.write_text("worker output\n")
    hypothesis = Hypothesis(metric="task/estimated_total_tokens", change="edit", id=name, scope=tuple(scope))
    result = JobResult(name, 0, None, False, False, "2026-01-01T00:00:00+00:00", 1.0, log)
    launcher = make_launcher(LauncherConfig(name="claude"))
    candidate = collect_candidate(ws, Experiment(name, hypothesis, checkout), result, launcher)
    return candidate, judging.judge(ws, state, name, candidate, checkout.target_base, checkout.bench_base,
                                    measurer=measurer)


def test_a_tampered_harness_voids_the_experiment_before_anything_is_built(
    lab: tuple[Workspace, LabState], green: list[Check], verdicts: dict[str, Verdict]
) -> None:
    candidate, judgment = judged_worker(
        lab,
        "tamper",
        ["src/alpha.txt"],
        {"target/src/alpha.txt": "alpha 1 faster\n", "bench/bench.py": "print('measuring, but kindly')\n"},
    )
    assert judgment.decision == Decision.KILL and judgment.rule == Rule.HARNESS
    assert judgment.reasons[0].startswith("harness tampered") and "bench.py" in judgment.reasons[0]
    assert "void" in judgment.reasons[0]
    assert not (lab[0].judge_dir / "tamper").exists(), "nothing is checked out or built for a void experiment"
    # the rule holds whatever else is true: a winning verdict does not rescue it
    checks = replaced(green, judging.collection_checks(candidate)[0])
    assert decide(checks, verdicts["lean"], candidate.flags).rule == Rule.HARNESS


def test_leaving_the_scope_is_killed_naming_the_files(
    lab: tuple[Workspace, LabState], green: list[Check], verdicts: dict[str, Verdict]
) -> None:
    candidate, judgment = judged_worker(
        lab,
        "wander",
        ["src/alpha.txt"],
        {"target/src/alpha.txt": "alpha 1 faster\n", "target/src/beta.txt": "beta 2\n", "target/src/new.txt": "new\n"},
    )
    assert judgment.decision == Decision.KILL and judgment.rule == Rule.SCOPE
    assert judgment.reasons[0].startswith("left its scope")
    assert "src/beta.txt" in judgment.reasons[0] and "src/new.txt" in judgment.reasons[0]
    assert "src/alpha.txt" not in judgment.reasons[0].split(":", 2)[-1]
    checks = replaced(green, judging.collection_checks(candidate)[1])
    assert decide(checks, verdicts["lean"], []).rule == Rule.SCOPE


def test_a_candidate_that_does_not_build_from_clean_is_killed(
    lab: tuple[Workspace, LabState], green: list[Check], tmp_path: Path, verdicts: dict[str, Verdict]
) -> None:
    _, judgment = judged_worker(lab, "nobuild", ["src/alpha.txt"], {"target/src/alpha.txt": "alpha 2\n"})
    assert judgment.decision == Decision.KILL and judgment.rule == Rule.TESTS
    assert judgment.reasons[0].startswith("does not build from clean") and "exit 1" in judgment.reasons[0]
    assert judgment.verdict is None, "nothing is measured that did not build"
    build = next(c for c in judgment.checks if c.name == "build")
    assert build.log and "grep -q" in Path(build.log).read_text()
    # the clean checkout holds the base plus the patch, not the worker's directory
    assert (Path(judgment.checkout or "") / "src/alpha.txt").read_text() == "alpha 2\n"
    # decide() alone: a failed build is a KILL even beside a winning verdict
    failed = replaced(green, step(tmp_path, "build", "echo 'error: no such symbol' >&2; exit 3"))
    judgment = decide(failed, verdicts["lean"], [])
    assert judgment.decision == Decision.KILL and judgment.rule == Rule.TESTS
    assert "exit 3" in judgment.reasons[0] and "no such symbol" in judgment.reasons[0]


def test_a_refused_change_is_killed_under_its_own_rule(green: list[Check], verdicts: dict[str, Verdict]) -> None:
    """On main a refused change (special or binary files, a patch over the limits) was KILLed under no rule, as
    if it were about main: a later win offered it again."""
    refused = replaced(green, Check(CheckName.PATCH, False, "special files tool.fifo: build outputs belong ..."))
    judgment = decide(refused, verdicts["lean"], [])
    assert judgment.decision == Decision.KILL and judgment.rule == Rule.ADMISSIBLE
    assert judgment.reasons[0].startswith("change refused: special files tool.fifo")


@pytest.mark.parametrize(("refusal", "rule"), [("changed", Rule.AS_BUILT), ("closed", Rule.OPEN_TREE)])
def test_a_binary_changed_or_a_tree_closed_while_measured_is_killed_under_its_own_rule(
    lab: tuple[Workspace, LabState], refusal: str, rule: Rule
) -> None:
    """On main both were KILLed under no rule, as if they were about main."""

    def refuses(ws: Workspace, baseline: BuiltBinary, candidate: BuiltBinary, **_: object) -> Verdict:
        if refusal == "changed":
            raise BinaryChanged("candidate", candidate, ["alpha.txt"])
        raise ClosedTree(candidate.path.parent)

    _, judgment = judged_worker(lab, refusal, ["src/alpha.txt"], {"target/src/alpha.txt": "alpha 1 faster\n"},
                                measurer=refuses)
    assert judgment.decision == Decision.KILL and judgment.rule == rule, judgment.reasons
    said = {"changed": "judge binary changed: the candidate", "closed": "closed its tree to the sandbox"}[refusal]
    assert judgment.reasons[0].startswith(said), judgment.reasons


def test_failing_target_tests_kill_or_send_a_win_back(
    green: list[Check], tmp_path: Path, verdicts: dict[str, Verdict]
) -> None:
    red = replaced(green, step(tmp_path, "tests", "echo 'FAILED test_count' >&2; exit 1"))
    killed = decide(red, verdicts["same"], [])
    assert killed.decision == Decision.KILL and killed.rule == Rule.TESTS
    assert killed.reasons[0].startswith("tests failed") and "FAILED test_count" in killed.reasons[0]
    assert killed.reasons[-1] == "verdict NO-CHANGE"
    win = decide(red, verdicts["lean"], [])
    assert win.decision == Decision.ITERATE and win.rule == Rule.TESTS
    assert win.reasons[0].startswith("a measured win, but tests failed") and "fix correctness" in win.reasons[0]


def test_failing_harness_tests_never_land(green: list[Check], tmp_path: Path, verdicts: dict[str, Verdict]) -> None:
    red = replaced(green, step(tmp_path, "bench-tests", "echo 'harness self-test failed' >&2; exit 2"))
    killed = decide(red, verdicts["same"], [])
    assert killed.decision == Decision.KILL and killed.rule == Rule.TESTS
    assert killed.reasons[0].startswith("bench-tests failed") and "exit 2" in killed.reasons[0]
    win = decide(red, verdicts["lean"], [])
    assert win.decision == Decision.ITERATE and "bench-tests failed" in win.reasons[0]


def test_a_quality_gate_failure_kills_whatever_the_metrics_win(
    green: list[Check], verdicts: dict[str, Verdict]
) -> None:
    real = decide(green, verdicts["cheat"], [])
    assert real.decision == Decision.KILL and real.rule == Rule.GATES
    assert list(real.reasons) == [
        "quality gate no_drop failed (task: oracle_passed dropped 1.0 -> 0.0): REGRESSED whatever the metrics say"
    ]
    # the same gate failure beside a clear, large measured win
    winning = verdict_of(
        [
            metric("task/wall_ms", "improved", -0.40),
            metric("task/estimated_total_tokens", "improved", -0.75, floor=0.0),
        ],
        [("information_recall", False, "missing: 'unique words: 826'"), ("determinism", True, "ok")],
    )
    assert winning.verdict == "REGRESSED"
    assert all(m.verdict == "improved" for m in winning.metrics)
    judgment = decide(green, winning, [])
    assert judgment.decision == Decision.KILL and judgment.rule == Rule.GATES
    assert list(judgment.reasons) == [
        "quality gate information_recall failed (missing: 'unique words: 826'): REGRESSED whatever the metrics say"
    ]


def test_a_regressed_metric_is_killed_but_not_as_a_gate(green: list[Check], verdicts: dict[str, Verdict]) -> None:
    judgment = decide(green, verdicts["fat"], [])
    assert judgment.decision == Decision.KILL and judgment.rule is None
    assert list(judgment.reasons) == ["REGRESSED: task/estimated_total_tokens regressed by +25.00% (floor 0.00%)"]


def test_no_claim_below_the_noise_floor(green: list[Check], verdicts: dict[str, Verdict]) -> None:
    no_change = decide(green, verdicts["same"], [])
    assert no_change.decision == Decision.KILL and no_change.rule == Rule.FLOOR
    assert list(no_change.reasons) == [
        "no effect beyond the noise floor: every metric within its noise floor and the smallest change that matters"
    ]
    # INCONCLUSIVE whose estimate is inside the floor: nothing to claim, killed
    faint = verdict_of([metric("report/wall_ms", "inconclusive", -0.01, interval=(-0.05, 0.03), floor=0.03, mde=0.06)])
    assert faint.verdict == "INCONCLUSIVE"
    killed = decide(green, faint, [])
    assert killed.decision == Decision.KILL and killed.rule == Rule.FLOOR
    assert killed.reasons[0].startswith("no effect shown beyond the printed noise floor")
    assert "MDE 6.00%" in killed.reasons[0]
    # INCONCLUSIVE whose estimate is beyond the floor on the good side: worth another, sharper try
    promising = verdict_of([metric("report/wall_ms", "inconclusive", -0.06, interval=(-0.12, 0.01), floor=0.03)])
    assert promising.verdict == "INCONCLUSIVE"
    again = decide(green, promising, [])
    assert again.decision == Decision.ITERATE and again.rule is None
    assert again.reasons[0].startswith("promising but unclear, not landed")
    # beyond the floor but within half its MDE: what a null effect's estimate does on a loud machine (the demo's
    # single-write at load 17), killed below the floor, not iterated
    noisy = verdict_of([metric("report/wall_ms", "inconclusive", -0.098, interval=(-0.21, 0.048), floor=0.03,
                               mde=0.219)])
    assert decide(green, noisy, []).rule == Rule.FLOOR
    # the good side depends on the metric's direction: higher-is-better moving down is not promising
    wrong_way = verdict_of(
        [metric("report/throughput", "inconclusive", -0.06, interval=(-0.12, 0.01), direction="higher")]
    )
    assert decide(green, wrong_way, []).rule == Rule.FLOOR


def test_rows_with_unlike_comparability_keys_are_never_compared(
    green: list[Check], verdicts: dict[str, Verdict]
) -> None:
    networked = verdicts["networked"]  # its cause is a typed field in process (--json states it only in words)
    assert networked.unjudged == Unjudged.INCOMPARABLE_ROWS
    judgment = decide(green, networked, [])
    assert judgment.decision == Decision.KILL and judgment.rule == Rule.COMPARABLE
    assert judgment.reasons[0].startswith("the verdict could not compare")
    assert "remote_transport" in judgment.reasons[0] and "'network'" in judgment.reasons[0]
    # an ERROR for another cause is a KILL too, but not under this rule
    broken = replace(networked, unjudged=Unjudged.BASELINE_FAILED,
                     reasons=["baseline failed scenario 'task' (exit 3); nothing can be compared"])
    other = decide(green, broken, [])
    assert other.decision == Decision.KILL and other.rule is None
    # the rule follows the verdict's cause, never its words: a baseline that printed "not comparable" is no
    # comparability refusal
    worded = replace(broken, reasons=["baseline failed scenario 'task': rows are not comparable, it said"])
    assert decide(green, worded, []).rule is None


def test_the_first_rule_that_applies_decides(green: list[Check], tmp_path: Path, verdicts: dict[str, Verdict]) -> None:
    everything_wrong = [
        Check("harness", False, "bench clone changed: suite.toml"),
        Check("scope", False, "files outside ['a']: b"),
        step(tmp_path, "build", "exit 1"),
    ]
    assert decide(everything_wrong, verdicts["cheat"], []).rule == Rule.HARNESS
    assert decide(everything_wrong[1:], verdicts["cheat"], []).rule == Rule.SCOPE
    assert decide(everything_wrong[2:], verdicts["cheat"], []).rule == Rule.TESTS
    nothing = decide(green, None, ["no-changes"])
    assert nothing.decision == Decision.KILL and list(nothing.reasons) == ["the worker changed nothing"]


# -- the lab's own bench clone is never modified ------------------------------------------------------------


def test_a_modified_bench_clone_stops_the_judge(make_workspace: Callable[..., Workspace]) -> None:
    ws = make_workspace()
    base = ws.bench_base()
    assert_bench_untouched(ws, base)  # clean: nothing raised
    (ws.bench_dir / "results").mkdir()
    (ws.bench_dir / "results" / "run.jsonl").write_text("{}\n")  # ignored by the harness: still clean
    assert_bench_untouched(ws, base)

    (ws.bench_dir / "bench.py").write_text("print('tuned')\n")
    with pytest.raises(LabIntegrityError, match=r"bench\.py") as caught:
        assert_bench_untouched(ws, base)
    assert "no verdict was taken" in str(caught.value) and str(ws.bench_dir) in str(caught.value)
    git(ws.bench_dir, "checkout", "--", "bench.py")

    git(ws.bench_dir, "rm", "-q", "--cached", "bench.py")  # only its index changed: still not the bench's base
    with pytest.raises(LabIntegrityError, match=r"\(bench\.py\)"):
        assert_bench_untouched(ws, base)
    git(ws.bench_dir, "reset", "-q")

    (ws.bench_dir / "extra_fixture.txt").write_text("x\n")
    with pytest.raises(LabIntegrityError, match="extra_fixture.txt"):
        assert_bench_untouched(ws, base)
    git(ws.bench_dir, "add", "extra_fixture.txt")
    git(ws.bench_dir, "commit", "-qm", "a fixture")
    with pytest.raises(LabIntegrityError, match="head moved|extra_fixture.txt"):
        assert_bench_untouched(ws, base)


def test_harness_tests_that_dirty_the_bench_clone_stop_the_judgment(make_workspace: Callable[..., Workspace]) -> None:
    ws = make_workspace(
        '[target]\nbuild = "true"\ntest = "true"\nbinary = "src/alpha.txt"\n[bench]\ntest = "echo cached >> bench.py"\n'
    )
    state = LabState.open(ws.root)
    try:
        checkout = ws.setup_worker("w1")
        (checkout.worker.target_dir / "src/alpha.txt").write_text("alpha 1 faster\n")
        patch = ws.target_vcs.changes(checkout.worker.target_dir, checkout.target_base).patch
        candidate = bare_candidate(patch=patch)
        with pytest.raises(LabIntegrityError, match=r"bench\.py"):
            judging.judge(ws, state, "dirty", candidate, checkout.target_base, checkout.bench_base)
        assert state.baseline(checkout.target_base) is None, "no baseline was built and nothing measured"
    finally:
        state.close()


def test_a_passing_harness_suite_runs_once_per_bench_base_and_a_failing_one_every_time(
    make_workspace: Callable[..., Workspace], tmp_path: Path
) -> None:
    counter = tmp_path / "harness-runs"
    ws = make_workspace(f'[bench]\ntest = "echo run >> {counter} && test -e {tmp_path}/red && exit 1 || true"\n')
    state = LabState.open(ws.root)
    try:
        values = builds.placeholders(ws, ws.reference_target, None)
        base = ws.bench_base()
        checks = [builds.harness_tests(ws, state, base, values, tmp_path / "logs") for _ in range(3)]
        assert all(c.passed for c in checks) and counter.read_text().count("run") == 1
        other = builds.harness_tests(ws, state, "0" * 40, values, tmp_path / "logs")  # another bench base
        assert other.passed and counter.read_text().count("run") == 2
        (tmp_path / "red").touch()
        reds = [builds.harness_tests(ws, state, "f" * 40, values, tmp_path / "logs") for _ in range(2)]
        assert not any(c.passed for c in reds) and counter.read_text().count("run") == 4
    finally:
        state.close()


# -- running workers get file-disjoint scopes ----------------------------------------------------------------


def test_pick_never_hands_out_a_scope_that_overlaps_a_running_one(lab_state: LabState) -> None:
    add_hypotheses(
        lab_state,
        {"id": "same-file", "scope": ["src/count.py"], "impact": 5},
        {"id": "glob-over-it", "scope": ["src/*.py"], "impact": 4.5},
        {"id": "its-directory", "scope": ["src/"], "impact": 4},
        {"id": "deep-glob", "scope": ["src/**/util.py"], "impact": 3.5},
        {"id": "no-scope-means-any", "scope": [], "impact": 3.2},
        {"id": "docs", "scope": ["docs/guide.md"], "impact": 3},
        {"id": "lookalike", "scope": ["srcx/count.py"], "impact": 2},
    )
    assert backlog.pick(lab_state, "exploit", []).id == "same-file"
    running = [["src/count.py"]]
    assert backlog.pick(lab_state, "exploit", running).id == "docs"
    running.append(["docs/guide.md"])
    assert backlog.pick(lab_state, "exploit", running).id == "lookalike"
    running.append(["srcx/"])
    assert backlog.pick(lab_state, "exploit", running) is None
    # a glob reaches only what it can match: `src/*.py` leaves `srcx/` free
    assert backlog.pick(lab_state, "exploit", [["src/*.py"], ["docs/guide.md"]]).id == "lookalike"


def test_globs_and_directories_of_running_experiments_block_the_files_they_cover(lab_state: LabState) -> None:
    add_hypotheses(
        lab_state,
        {"id": "nested-file", "scope": ["lib/core/parse.c"], "impact": 5},
        {"id": "header", "scope": ["include/parse.h"], "impact": 4},
        {"id": "tests", "scope": ["tests/test_parse.py"], "impact": 3},
    )
    assert backlog.pick(lab_state, "exploit", [["lib/*.c"]]).id == "header"  # `*` crosses `/` in a scope
    assert backlog.pick(lab_state, "exploit", [["lib"]]).id == "header"  # a directory covers what is under it
    assert backlog.pick(lab_state, "exploit", [["lib/core/"], ["include/*.h"]]).id == "tests"
    assert backlog.pick(lab_state, "exploit", [[]]) is None  # a running experiment without a scope may touch anything
    # ...and the pick's own choice would overlap nothing that runs
    for busy in (["lib/*.c"], ["lib"], ["include/*.h"], ["tests/"]):
        picked = backlog.pick(lab_state, "exploit", [busy])
        assert picked is not None and not backlog.scopes_overlap(picked.hypothesis.scope, busy)


def test_explore_lanes_take_explore_hypotheses_and_respect_scopes_too(lab_state: LabState) -> None:
    add_hypotheses(
        lab_state,
        {"id": "top", "scope": ["a.py"], "impact": 5},
        {"id": "wild", "scope": ["b.py"], "impact": 1, "lane": "explore"},
        {"id": "wilder", "scope": ["c.py"], "confidence": 0.25, "lane": "explore"},
    )
    assert backlog.pick(lab_state, "explore", []).id == "wild"
    assert backlog.pick(lab_state, "explore", [["b.py"]]).id == "wilder"
    assert backlog.pick(lab_state, "exploit", [["a.py"]]).id == "wild"  # nothing else free for an exploit lane
    lab_state.update_hypothesis("top", status=HypothesisStatus.RUNNING)
    assert backlog.pick(lab_state, "exploit", [["a.py"], ["b.py"]]).id == "wilder"


def test_every_failed_check_is_in_the_reasons_in_rule_order(
    green: list[Check], tmp_path: Path, verdicts: dict[str, Verdict]
) -> None:
    # failed target tests beside a REGRESSED verdict (a gate) were dropped from the reasons
    red = replaced(green, step(tmp_path, "tests", "echo 'FAILED test_count' >&2; exit 1"))
    judgment = decide(red, verdicts["cheat"], [])
    assert judgment.decision == Decision.KILL and judgment.rule == Rule.TESTS
    assert [r.split(" ")[0] for r in judgment.reasons] == ["tests", "quality"]
    assert "FAILED test_count" in judgment.reasons[0] and "no_drop" in judgment.reasons[1]
    # a regressed metric (no gate) beside red tests
    fat = decide(red, verdicts["fat"], [])
    assert fat.reasons[0].startswith("tests failed") and fat.reasons[1].startswith("REGRESSED: ")
    everything_wrong = [
        Check("harness", False, "bench clone changed: suite.toml"),
        Check("scope", False, "files outside ['a']: b"),
        step(tmp_path, "build", "exit 1"),
    ]
    reasons = decide(everything_wrong, verdicts["cheat"], []).reasons
    assert [r.split(" ")[0] for r in reasons] == ["harness", "left", "does", "quality"]


def test_check_names_are_the_words_lab_db_and_the_journal_have_always_stored() -> None:
    assert [name.value for name in CheckName] == [
        "worker", "harness", "scope", "patch", "tests-kept", "apply", "build", "tests", "test-count", "test-count-base",
        "bench-tests", "binary", "plausible", "review", "sweep", "hack-review", "differential", "second-look"]
    stored = Check(CheckName.TESTS_KEPT, False, "2 removed").to_dict()
    assert json.dumps(stored) == '{"name": "tests-kept", "passed": false, "detail": "2 removed", "log": null}'
    assert Check.from_dict(stored).name is CheckName.TESTS_KEPT
