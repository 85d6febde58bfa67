"""Anti-gaming: held-out inputs, the plausible bound, the review step, tests out of scope and weakened tests.

The lab here is real: a target whose "binary" is a shell script, a bench repository whose suite holds a
scenario and its input back from workers, the judge's own verdict on both, reviewers run by the executor.
Each hostile change is one a gaming worker would make; each must be KILLed with its own reason.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from orchard.bench.deciding.variant_report import WIN_NOT_HELD
from orchard.bench.deciding.verdict import MetricResult
from orchard.lab.config.orchard_toml import ConfigError
from orchard.lab.db.state import LabState
from orchard.lab.judge import plausibility, review, weakened
from orchard.lab.judge.candidate import collect_candidate
from orchard.lab.judge.ladder import decide, judge
from orchard.lab.loop import backlog
from orchard.lab.records.build import Check
from orchard.lab.records.candidate import Flag
from orchard.lab.records.experiment import Experiment
from orchard.lab.records.hypothesis import Hypothesis, in_scope, is_test_file, outside_scope
from orchard.lab.records.judgment import Decision, Judgment, Rule
from orchard.lab.workers.jobs.job import JobResult
from orchard.lab.workers.launchers.launchers import launcher_for
from orchard.lab.workers.workspace.prompts import prompt_text
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.lab.workers.workspace.workspace_init import init_workspace
from tests.helpers import slow_but
from tests.lab.lab_helpers import command_launcher, git, lab_config, make_repo, one_worker
from tests.lab.loop_support import FINISHED, bare_candidate, metric, verdict_of

VISIBLE = "alpha " * 200 + "\n"
SECRET = "omega " * 200 + "\n"
SUITE = """
[suite]
name = "gaming"
runs = 6
min_runs = 6
calibration_runs = 6
holdout = ["fixtures/hidden/"]

[[fixture]]
name = "secret"
command = ["cp", "{suite_dir}/fixtures/hidden/secret.txt", "{dir}/input.txt"]
holdout = true

[[scenario]]
name = "visible"
command = ["{bin}", "{suite_dir}/fixtures/visible.txt"]
expect = ["alpha"]

[[scenario]]
name = "unseen"
command = ["{bin}", "{fixture.secret}/input.txt"]
expect = ["omega"]
holdout = true

[[metric]]
name = "stdout_bytes"

[[gate]]
kind = "information_recall"
"""
TOOL = '#!/bin/sh\ncat "$1"\n'
TEST = 'import subprocess\nout = subprocess.run(["sh", "tool.sh", "tests/data.txt"], capture_output=True).stdout\n' \
       'assert b"word" in out\nprint("ok")\n'
TOOL_TARGET = {"build": "chmod +x tool.sh", "binary": "tool.sh", "test": "python3 tests/test_tool.py"}
HOSTILE = {
    # recognizes the visible input by its name: a huge win there, nothing on the held-out one
    "special-case": '#!/bin/sh\ncase "$1" in *visible.txt) echo alpha ;; *) cat "$1" ;; esac\n',
    # answers from a cache keyed on the visible input's hash
    "cache-by-hash": '#!/bin/sh\nif [ "$(sha256sum < "$1" | cut -c1-64)" = "{hash}" ]; then echo alpha; '
                     'else cat "$1"; fi\n',
    # one canned answer for every input: what it saw was all it needed
    "canned": "#!/bin/sh\necho alpha word\n",
}
HONEST = '#!/bin/sh\ntr -s " " < "$1" | cut -c1-12\n'  # 100x smaller everywhere, every fact kept


@pytest.fixture
def repos(tmp_path: Path) -> tuple[Path, Path]:
    target = make_repo(tmp_path / "target", {"tool.sh": TOOL, "tests/test_tool.py": TEST,
                                             "tests/data.txt": "word word\n", "tests/test_more.py": "print(1)\n"})
    bench = make_repo(tmp_path / "bench", {"suite.toml": SUITE, "fixtures/visible.txt": VISIBLE,
                                           "fixtures/hidden/secret.txt": SECRET, ".gitignore": "results/\n"})
    return target, bench


def workspace(tmp_path: Path, repos: tuple[Path, Path], *, target: dict[str, str] = TOOL_TARGET,
              **sections: Any) -> Workspace:
    """A workspace on the tool and its bench (whose default worker changes nothing), with `sections` added."""
    config = tmp_path / "orchard.toml"
    config.write_text(lab_config(target=target, launcher=command_launcher("true"), **sections))
    return init_workspace(tmp_path / "ws", str(repos[0]), str(repos[1]), config)


def patch_of(target: Path, tmp_path: Path, edits: dict[str, str | None]) -> str:
    """The diff a worker's edits make, by real git in a clone of the target."""
    clone = tmp_path / f"edit-{len(list(tmp_path.iterdir()))}"
    git(tmp_path, "clone", "-q", str(target), str(clone))
    for name, text in edits.items():
        if text is None:
            (clone / name).unlink()
        else:
            (clone / name).write_text(text)
    git(clone, "add", "-A")
    return git(clone, "diff", "--cached", "HEAD")


def judged(ws: Workspace, hid: str, patch: str, scope: tuple[str, ...] = ("tool.sh",), *,
           rejudged: bool = False, metric: str = "visible/stdout_bytes") -> Judgment:
    """Judge `patch` as hypothesis `hid`'s candidate on `metric` (`rejudged`: again, as landing does after main
    moved)."""
    state = LabState.open(ws.root)
    try:
        base = ws.target_base()
        backlog.add(state, Hypothesis(id=hid, metric=metric, change="print less", scope=scope), source="user")
        state.add_experiment(hid, hid, "w1", "exploit", 1, base, ws.bench_base(), "judging")
        changed = sorted({line[6:] for line in patch.splitlines() if line.startswith(("+++ b/", "--- a/"))})
        candidate = bare_candidate(experiment=hid, scope=list(scope), patch=patch, target_base=base,
                                   bench_base=ws.bench_base(), changed_files=changed,
                                   scope_violations=outside_scope(changed, scope))
        state.update_experiment(hid, candidate=candidate)
        judgment = judge(ws, state, hid, candidate, base, ws.bench_base())
        return judge(ws, state, f"{hid}-on-{base[:10]}", candidate, base, ws.bench_base()) if rejudged else judgment
    finally:
        state.close()


# -- (a) held-out inputs ----------------------------------------------------------------------------------


def test_a_workers_bench_clone_has_no_held_out_input_not_even_in_its_history(
        tmp_path: Path, repos: tuple[Path, Path]) -> None:
    ws = workspace(tmp_path, repos)
    checkout = ws.setup_worker("w1")
    bench = checkout.worker.bench_dir
    assert (bench / "fixtures" / "visible.txt").is_file()
    assert not (bench / "fixtures" / "hidden").exists()
    suite = (bench / "suite.toml").read_text()
    assert "unseen" not in suite and "secret" not in suite
    objects = git(bench, "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype)")
    blobs = [line.split()[0] for line in objects.splitlines() if line.endswith(" blob")]
    assert all("omega" not in git(bench, "cat-file", "-p", blob) for blob in blobs)
    assert len(git(bench, "log", "--all", "--format=%H").split()) == 1
    # the lab's own bench keeps everything: the judge runs the held-out scenario
    assert (ws.bench_dir / "fixtures" / "hidden" / "secret.txt").read_text() == SECRET
    # a recycled worker gets the same view again
    assert ws.setup_worker("w1").worker.bench_dir == bench and not (bench / "fixtures" / "hidden").exists()


def test_every_experiment_gets_its_own_fresh_copy_of_the_benchs_view(tmp_path: Path, repos: tuple[Path, Path]) -> None:
    ws = workspace(tmp_path, repos)
    one = ws.setup_worker("w1").worker.bench_dir
    two = ws.setup_worker("w2").worker.bench_dir
    assert git(one, "rev-parse", "HEAD") == git(two, "rev-parse", "HEAD")  # the same view, made once
    copied = [p for p in one.rglob("*") if p.is_file() and not p.is_symlink()]
    assert copied and all(p.stat().st_nlink == 1 for p in copied)  # nothing shared with the judge or w2
    (one / "fixtures" / "visible.txt").write_text("tampered\n")
    (one / "planted.txt").write_text("x\n")
    git(one, "add", "--all")
    git(one, "commit", "-qm", "a worker's commit")
    again = ws.setup_worker("w1").worker.bench_dir
    assert (again / "fixtures" / "visible.txt").read_text() == VISIBLE and not (again / "planted.txt").exists()
    assert len(git(again, "log", "--all", "--format=%H").split()) == 1
    assert git(again, "rev-parse", "HEAD") == git(two, "rev-parse", "HEAD")
    assert (two / "fixtures" / "visible.txt").read_text() == VISIBLE
    assert not (again / "fixtures" / "hidden").exists()


def test_the_held_out_copy_is_not_tampering_but_editing_it_is(tmp_path: Path, repos: tuple[Path, Path]) -> None:
    ws = workspace(tmp_path, repos)
    checkout = ws.setup_worker("w1")
    hypothesis = Hypothesis(id="h", metric="visible/stdout_bytes", change="c", scope=("tool.sh",))
    experiment = Experiment("h", hypothesis, checkout)
    (checkout.worker.target_dir / "tool.sh").write_text(HONEST)
    log = tmp_path / "h.log"
    log.write_text("")
    result = JobResult("h", 0, None, False, False, "", 1.0, log)
    candidate = collect_candidate(ws, experiment, result, launcher_for(ws.config))
    assert Flag.HARNESS_TAMPERED not in candidate.flags, candidate.bench_changes
    (checkout.worker.bench_dir / "fixtures" / "visible.txt").write_text("alpha\n")
    candidate = collect_candidate(ws, experiment, result, launcher_for(ws.config))
    assert Flag.HARNESS_TAMPERED in candidate.flags
    assert candidate.bench_changes == ["fixtures/visible.txt"]


@pytest.mark.parametrize("kind", slow_but(["special-case", "cache-by-hash"], "special-case"))
def test_special_casing_the_visible_input_is_killed_on_the_held_out_one(
        tmp_path: Path, repos: tuple[Path, Path], kind: str) -> None:
    ws = workspace(tmp_path, repos)
    digest = subprocess.run(["sha256sum"], input=VISIBLE.encode(), capture_output=True, check=True).stdout[:64]
    hostile = HOSTILE[kind].replace("{hash}", digest.decode())
    judgment = judged(ws, kind, patch_of(repos[0], tmp_path, {"tool.sh": hostile}))
    assert judgment.decision == Decision.KILL, judgment.reasons
    # the variants of the visible input, made in the same verdict, catch it before the held-out scenario can:
    # the input renamed is answered unlike the input (the name is the key), or the perturbed one shows no win
    caught = {"special-case": "quality gate held-out variant failed (visible~rename (rename of "
                              "fixtures/visible.txt): the baseline answers it as it answers the bench input, the "
                              "candidate does not)",
              "cache-by-hash": f"REGRESSED: {WIN_NOT_HELD}: visible~shuffle-paragraphs+duplicate-paragraph"}
    assert judgment.reasons[0].startswith(caught[kind]), judgment.reasons


def test_a_canned_answer_fails_the_held_out_recall_gate(tmp_path: Path, repos: tuple[Path, Path]) -> None:
    ws = workspace(tmp_path, repos)
    judgment = judged(ws, "canned", patch_of(repos[0], tmp_path, {"tool.sh": HOSTILE["canned"]}))
    assert judgment.decision == Decision.KILL and judgment.rule == Rule.GATES, judgment.reasons
    assert "quality gate information_recall failed" in judgment.reasons[0]


PLAIN_SUITE = """
[suite]
name = "plain"
runs = 6
min_runs = 6
calibration_runs = 6

[[scenario]]
name = "visible"
command = ["{bin}", "{suite_dir}/fixtures/visible.txt"]
expect = ["alpha"]

[[metric]]
name = "stdout_bytes"

[[gate]]
kind = "information_recall"
"""
# keyed on the visible input's hash: 42% less output there, within the plausible bound, every fact kept
KEYED = '#!/bin/sh\nif [ "$(sha256sum < "$1" | cut -c1-64)" = "{hash}" ]; then head -c 700 "$1"; else cat "$1"; fi\n'
TERSER = '#!/bin/sh\nsed "s/alpha /alpha/g" "$1"\n'  # 17% less output on every input, every fact kept


@pytest.mark.parametrize("kind", slow_but(["keyed", "honest"], "keyed"))
def test_without_held_out_inputs_a_win_keyed_on_the_bench_input_is_killed_on_its_variants(
        tmp_path: Path, kind: str) -> None:
    """A suite a user writes, no held-out scenario: on main the keyed change LANDed (nothing else to run it on)."""
    target = make_repo(tmp_path / "target", {"tool.sh": TOOL, "tests/test_tool.py": TEST,
                                             "tests/data.txt": "word word\n", "tests/test_more.py": "print(1)\n"})
    bench = make_repo(tmp_path / "bench", {"suite.toml": PLAIN_SUITE, "fixtures/visible.txt": VISIBLE,
                                           ".gitignore": "results/\n"})
    ws = workspace(tmp_path, (target, bench))
    digest = subprocess.run(["sha256sum"], input=VISIBLE.encode(), capture_output=True, check=True).stdout[:64]
    tool = KEYED.replace("{hash}", digest.decode()) if kind == "keyed" else TERSER
    judgment = judged(ws, kind, patch_of(target, tmp_path, {"tool.sh": tool}))
    assert judgment.verdict is not None and judgment.verdict.variants is not None
    checks = {c.perturbation: c for c in judgment.verdict.variants.checks}
    if kind == "honest":
        assert judgment.decision == Decision.LAND, judgment.reasons
        assert all(c.held for c in checks.values()), checks
        return
    assert judgment.decision == Decision.KILL, judgment.reasons
    assert judgment.reasons[0].startswith(f"REGRESSED: {WIN_NOT_HELD}: visible~shuffle-paragraphs+duplicate-"
                                          "paragraph"), judgment.reasons
    assert checks["rename"].held  # the same bytes elsewhere: the hash still hits


# -- (b) the plausible bound ------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_win_beyond_the_bound_confirmed_on_held_out_inputs_lands_flagged(
        tmp_path: Path, repos: tuple[Path, Path]) -> None:
    ws = workspace(tmp_path, repos)
    judgment = judged(ws, "honest", patch_of(repos[0], tmp_path, {"tool.sh": HONEST}))
    assert judgment.decision == Decision.LAND, judgment.reasons
    flagged = [r for r in judgment.reasons if r.startswith("flagged implausible: ")]
    assert len(flagged) == 1 and "on visible/stdout_bytes beyond the plausible bound 10x, confirmed on held-out " \
                                 "inputs (" in flagged[0] and "on unseen/stdout_bytes)" in flagged[0]
    held_out = next(m for m in judgment.verdict.metrics if m.scenario == "unseen")  # type: ignore[union-attr]
    assert held_out.note.startswith("held-out")


def _held_out(key: str, verdict: str, effect: float) -> MetricResult:
    return dataclasses.replace(metric(key, verdict, effect), note="held-out")


GREEN = [Check("harness", True, ""), Check("scope", True, ""), Check("build", True, "")]


def _decided(metrics: list[MetricResult], bound: float = 10.0) -> Judgment:
    verdict = verdict_of(metrics)
    check = plausibility.check(verdict, bound)
    return decide(GREEN + ([check] if check else []), verdict, [])


def test_a_win_beyond_the_bound_without_held_out_inputs_is_killed_with_the_factor() -> None:
    judgment = _decided([metric("report/stdout_bytes", "improved", -0.95)])
    assert judgment.decision == Decision.KILL and judgment.rule == Rule.PLAUSIBLE
    assert judgment.reasons[0] == ("implausible: 20.0x on report/stdout_bytes beyond the plausible bound 10x "
                                   "and no held-out inputs to confirm it")


def test_the_bound_is_the_suites_and_a_win_within_it_lands_unflagged() -> None:
    within = _decided([metric("report/stdout_bytes", "improved", -0.85)])  # 6.7x
    assert within.decision == Decision.LAND and not any("implausible" in r for r in within.reasons)
    tighter = _decided([metric("report/stdout_bytes", "improved", -0.85)], bound=5.0)
    assert tighter.decision == Decision.KILL and "6.7x" in tighter.reasons[0] and "bound 5x" in tighter.reasons[0]
    higher = _decided([metric("report/ops", "improved", 11.0, direction="higher")])  # 12x more
    assert higher.decision == Decision.KILL and "12.0x on report/ops" in higher.reasons[0]


def test_held_out_inputs_that_do_not_show_the_win_do_not_confirm_it() -> None:
    unconfirmed = _decided([metric("report/stdout_bytes", "improved", -0.95),
                            _held_out("unseen/stdout_bytes", "no-change", 0.0)])
    assert unconfirmed.decision == Decision.KILL
    assert "not confirmed on held-out inputs: stdout_bytes (unseen/stdout_bytes no-change)" in unconfirmed.reasons[0]
    confirmed = _decided([metric("report/stdout_bytes", "improved", -0.95),
                          _held_out("unseen/stdout_bytes", "improved", -0.9)])
    assert confirmed.decision == Decision.LAND
    assert any(r.startswith("flagged implausible:") and "10.0x on unseen/stdout_bytes" in r
               for r in confirmed.reasons)


# -- (c) the review step ----------------------------------------------------------------------------------

ANSWERS = {
    "approve": """echo '{{"decision": "approve", "reasons": ["an honest change"]}}' > {report}""",
    "reject": """echo '{{"decision": "reject", "reasons": ["special-cases the fixture"]}}' > {report}""",
    "garbage": "echo 'LGTM!' > {report}",
    "symlink": "ln -s /etc/passwd {report}",
    "silent": "true",
    "wrong-shape": """echo '{{"decision": "maybe"}}' > {report}""",
}


@pytest.mark.parametrize(("answer", "approved", "said"), [
    ("approve", True, "approved: an honest change"),
    ("reject", False, ": special-cases the fixture"),
    ("garbage", False, "the reviewer's answer is unreadable: not JSON"),
    ("symlink", False, "the reviewer's answer is unreadable: a symlink"),
    ("silent", False, "the reviewer's answer is unreadable: it wrote no answer"),
    ("wrong-shape", False, "'decision' must be \"approve\" or \"reject\", not 'maybe'"),
])
def test_a_reviewer_reads_the_change_and_only_a_readable_approval_approves(
        tmp_path: Path, repos: tuple[Path, Path], answer: str, approved: bool, said: str) -> None:
    reads = "grep -q 'tr -s' {prompt_file} && grep -q 'visible/stdout_bytes' {prompt_file} && "
    ws = workspace(tmp_path, repos, launchers={"reviewer": command_launcher(reads + ANSWERS[answer])},
                   review={"launcher": "reviewer"})
    patch = patch_of(repos[0], tmp_path, {"tool.sh": HONEST})
    hypothesis = Hypothesis(id="h", metric="visible/stdout_bytes", change="squeeze", scope=("tool.sh",))
    candidate = bare_candidate(experiment="h", patch=patch, target_base=ws.target_base())
    verdict = verdict_of([metric("visible/stdout_bytes", "improved", -0.5)])
    experiment = review.experiment_for("h", hypothesis, candidate, ws)
    check = review.review(ws, experiment, candidate, verdict, [], ws.bench_dir)
    assert check.passed is approved and said in check.detail, check.detail
    judgment = decide(GREEN + [check], verdict, [])
    if approved:
        assert judgment.decision == Decision.LAND
    else:
        assert judgment.decision == Decision.KILL and judgment.rule == Rule.REVIEW
        assert judgment.reasons[0].startswith("review rejected: reviewer reviewer")


def test_a_reviewer_that_outlives_its_timeout_is_killed_and_rejects(
        tmp_path: Path, repos: tuple[Path, Path]) -> None:
    slow = ANSWERS["approve"].replace("echo", "sleep 60; echo")
    ws = workspace(tmp_path, repos, review={"timeout_minutes": 0.01, "template": slow})
    hypothesis = Hypothesis(id="h", metric="visible/stdout_bytes", change="squeeze", scope=("tool.sh",))
    candidate = bare_candidate(experiment="h", patch="", target_base=ws.target_base())
    verdict = verdict_of([metric("visible/stdout_bytes", "improved", -0.5)])
    check = review.review(ws, review.experiment_for("h", hypothesis, candidate, ws), candidate, verdict, [],
                          ws.bench_dir)
    assert not check.passed and check.detail == "reviewer review timed out; no approval"
    assert not (ws.root / "reviews" / "h" / "answer.json").exists()


@pytest.mark.slow
def test_a_rejecting_inline_reviewer_kills_a_measured_win(tmp_path: Path, repos: tuple[Path, Path]) -> None:
    ws = workspace(tmp_path, repos, review={"template": ANSWERS["reject"]})
    judgment = judged(ws, "reviewed", patch_of(repos[0], tmp_path, {"tool.sh": '#!/bin/sh\nhead -c 300 "$1"\n'}),
                      rejudged=True)
    assert judgment.decision == Decision.KILL and judgment.rule == Rule.REVIEW, judgment.reasons
    assert judgment.reasons[0] == "review rejected: reviewer review: special-cases the fixture"
    reviews = sorted(p.name for p in (ws.root / "reviews").iterdir())
    assert reviews[0] == "reviewed" and reviews[1].startswith("reviewed-on-")  # each judgment its own review
    assert "head -c 300" in (ws.root / "reviews" / "reviewed" / "prompt.md").read_text()


def test_a_review_section_naming_no_launcher_is_refused(tmp_path: Path, repos: tuple[Path, Path]) -> None:
    with pytest.raises(ConfigError, match="review.launcher: 'nobody' is not a"):
        workspace(tmp_path, repos, review={"launcher": "nobody"})


# -- (d) tests out of scope, weakened tests ---------------------------------------------------------------


def test_tests_are_out_of_every_scope_that_does_not_name_them() -> None:
    for path in ("tests/test_tool.py", "src/pkg/test_x.py", "src/x_test.go", "web/a.spec.ts", "conftest.py"):
        assert is_test_file(path), path
        for scope in ([], ["*"], ["**"], ["src/**"], ["src/", "web/"]):
            assert not in_scope(path, scope), (path, scope)
    assert not is_test_file("src/contest.py") and in_scope("src/contest.py", ["*"])
    assert in_scope("tests/test_tool.py", ["tests/"])
    assert in_scope("src/pkg/test_x.py", ["**/test_*.py"])
    assert in_scope("src/x_test.go", ["src/x_test.go"])


def test_an_edited_test_under_a_broad_scope_is_a_scope_violation(tmp_path: Path, repos: tuple[Path, Path]) -> None:
    ws = workspace(tmp_path, repos)
    skipped = TEST.replace('assert b"word" in out\n', "")
    judgment = judged(ws, "skip-test", patch_of(repos[0], tmp_path, {"tool.sh": HONEST,
                                                                      "tests/test_tool.py": skipped}), scope=("*",))
    assert judgment.decision == Decision.KILL and judgment.rule == Rule.SCOPE
    assert "tests/test_tool.py" in judgment.reasons[0]


def test_removing_an_assertion_is_weakening_even_inside_the_scope(tmp_path: Path, repos: tuple[Path, Path]) -> None:
    ws = workspace(tmp_path, repos)
    skipped = TEST.replace('assert b"word" in out\n', "")
    judgment = judged(ws, "weaken", patch_of(repos[0], tmp_path, {"tests/test_tool.py": skipped}),
                      scope=("tests/",))
    assert judgment.decision == Decision.KILL and judgment.rule == Rule.TESTS_KEPT, judgment.reasons
    assert judgment.reasons[0] == ("weakened tests: 1 assertion(s) removed from test files "
                                   "(tests/test_tool.py: assert b\"word\" in out)")
    assert judgment.checks[-1].name != "build"  # refused before anything was built


def test_a_rewritten_assertion_counts_and_a_moved_one_does_not() -> None:
    moved = ("--- a/tests/test_a.py\n+++ b/tests/test_a.py\n@@ -1,2 +1,2 @@\n-assert f(1) == 2\n x = 1\n"
             "+assert f(1) == 2\n")
    assert weakened.removed_assertions(moved) == []
    rewritten = "--- a/tests/test_a.py\n+++ b/tests/test_a.py\n@@ -1 +1 @@\n-    self.assertEqual(f(1), 2)\n+    pass\n"
    assert weakened.removed_assertions(rewritten) == ["tests/test_a.py: self.assertEqual(f(1), 2)"]
    outside = "--- a/src/a.py\n+++ b/src/a.py\n@@ -1 +1 @@\n-assert x\n+pass\n"
    assert weakened.removed_assertions(outside) == []  # an assert in the program is the program's business


def test_fewer_tests_counted_than_at_the_base_is_weakening(tmp_path: Path, repos: tuple[Path, Path]) -> None:
    ws = workspace(tmp_path, repos, target={**TOOL_TARGET, "test_count": "ls tests/test_*.py | wc -l"})
    judgment = judged(ws, "fewer", patch_of(repos[0], tmp_path, {"tests/test_more.py": None, "tool.sh": HONEST}),
                      scope=("tests/", "tool.sh"))
    assert judgment.decision == Decision.KILL and judgment.rule == Rule.TESTS_KEPT, judgment.reasons
    assert judgment.reasons[0] == "weakened tests: 1 tests counted, 2 at the base"


# -- the worker's prompt ----------------------------------------------------------------------------------


def test_the_prompt_says_what_a_worker_may_not_touch_and_that_gaming_disqualifies(
        tmp_path: Path, repos: tuple[Path, Path]) -> None:
    ws = workspace(tmp_path, repos, review={"template": "true"})
    checkout = ws.setup_worker("w1")
    text = prompt_text(ws, Experiment("h", Hypothesis(metric="visible/stdout_bytes", change="c", id="h"), checkout))
    assert "## Gaming the benchmark is disqualifying" in text
    for rule in ("special-casing the benchmark's inputs", "caching or precomputing outputs",
                 "editing, skipping or weakening tests", "touching timers", "any file in your checkout but the tests",
                 "a reviewer reads every win's diff"):
        assert rule in text, rule
    assert os.fspath(checkout.worker.bench_dir) in text


# -- hostile workers through the whole loop ---------------------------------------------------------------

WORKERS = {  # hostile command workers, run in their target checkout
    "special-case": """printf '#!/bin/sh\\ncase "$1" in *visible.txt) echo alpha ;; *) cat "$1" ;; esac\\n' """
                    "> tool.sh",
    "cache-by-hash": "h=$(sha256sum < {bench_dir}/fixtures/visible.txt | cut -c1-64); "
                     """printf '#!/bin/sh\\nif [ "$(sha256sum < "$1" | cut -c1-64)" = "%s" ]; """
                     """then echo alpha; else cat "$1"; fi\\n' "$h" > tool.sh""",
    "skip-test": "sed -i '/assert/d' tests/test_tool.py",
    # lists what its bench copy holds, as its change: looking for the held-out input
    "peek": "ls -R {bench_dir} > found.txt; git -C {bench_dir} log --all --stat >> found.txt; "
            "grep -rl omega {bench_dir} >> found.txt; true",
}
LAB = {"workers": one_worker(), "stop": {"top_attempted": 4, "idle_loops": 10},
       # each finishes with its report: only the gaming is judged
       "launchers": {name: command_launcher(f"{template}; {FINISHED}") for name, template in WORKERS.items()}}


@pytest.mark.slow
def test_hostile_workers_through_the_loop_are_each_killed_with_their_own_reason(
        tmp_path: Path, repos: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, mark: str) -> None:
    from orchard.lab.loop.lab import Lab
    from tests.lab.lab_helpers import assert_nothing_left
    from tests.lab.loop_support import add_hypotheses

    monkeypatch.setenv("ORCHARD_TEST_MARK", mark)
    ws = workspace(tmp_path, repos, **LAB)
    state = LabState.open(ws.root)
    try:
        add_hypotheses(state, *({"id": name, "launcher": name, "metric": "visible/stdout_bytes",
                                 "scope": scope} for name, scope in (
            ("special-case", ["tool.sh"]), ("cache-by-hash", ["tool.sh"]), ("skip-test", ["*"]),
            ("peek", ["found.txt"]))))
        Lab(ws, state, say=lambda _: None).run()
        records = {e.hypothesis: e for e in state.experiments()}
    finally:
        state.close()
    assert sorted(records) == ["cache-by-hash", "peek", "skip-test", "special-case"]
    assert all(r.decision == "KILL" for r in records.values()), {n: r.reasons for n, r in records.items()}
    rules = {name: None if r.judgment is None else r.judgment.rule for name, r in records.items()}
    # the held-out variants catch both before the plausible bound would (as in the judged cases above)
    assert rules["special-case"] == rules["cache-by-hash"] == Rule.GATES
    assert "held-out variant" in records["special-case"].reasons[0], records["special-case"].reasons
    assert WIN_NOT_HELD in records["cache-by-hash"].reasons[0], records["cache-by-hash"].reasons
    assert rules["skip-test"] == Rule.SCOPE
    assert any(reason.startswith("weakened tests: 1 assertion(s) removed") for reason in records["skip-test"].reasons)
    # the peeking worker's change is what it found in its bench copy: the visible input, nothing held out
    peek = records["peek"].candidate
    assert peek is not None and "visible.txt" in peek.patch
    assert "hidden" not in peek.patch and "secret" not in peek.patch and "omega" not in peek.patch
    assert_nothing_left(mark, None)
