"""The demo's content does what it is built to show, judged by the real verdict.

Each hypothesis of the embedded demo is meant to take one path through the
research loop. Here every patch is applied to a real git repository made
from the target template, built with its Makefile, tested with its own unit
tests and judged with `orchard verdict` against the template's build, the
way the lab's judge will: two wins (time, output size), one below the noise
floor, one caught by a quality gate, one by the unit tests, one leaving its
scope, one touching the bench, and a win judged again after main moved. The
bench holds one scenario out of every worker's copy; the output-size win is
beyond the suite's plausible bound and is confirmed there.
"""

from __future__ import annotations

import fnmatch
import json
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from orchard import demo
from orchard.bench.held_out.holdout import withhold
from orchard.bench.suites.suite_reader import load_suite
from tests.helpers import orchard, session_lock_file

# What each hypothesis is built to show in one lab run.
OUTCOMES = {
    "count-with-dict": "LAND: wall time, at least 2x faster",
    "terse-report": "LAND: output size (what an agent reads), every fact kept",
    "top-ten-default": "KILL: smaller output but information_recall drops",
    "longest-word-one-pass": "KILL: unit tests fail",
    "tokenize-regex": "KILL: the patch edits a test outside its scope",
    "read-whole-file": "KILL: the worker's bench clone is modified",
    "single-write": "KILL: no effect above the noise floor",
}
DOCUMENTED_KEYS = {
    "id", "title", "metric", "current_value", "suspected_cause", "change", "predicted_effect",
    "scope", "impact", "confidence", "effort", "lane", "patch", "bench_patch",
}
RUNS = "12"  # pairs per verdict and per calibration: enough for these effects, quick
# Verdicts that run to the last pair (some metric stays unclear) are marked slow.


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300)


def git(cwd: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-c", "user.name=Demo Test", "-c", "user.email=demo@orchard.invalid", *args],
        cwd=cwd, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
    return result.stdout


def repository(template: Path, destination: Path) -> Path:
    """A git repository whose first commit is the template's content."""
    demo.copy_template(template, destination)
    git(destination, "init", "-q", "-b", "main")
    git(destination, "add", "-A")
    git(destination, "commit", "-q", "-m", "template")
    return destination


def hypotheses() -> dict[str, dict]:
    with open(demo.HYPOTHESES, "rb") as handle:
        return {h["id"]: h for h in tomllib.load(handle)["hypothesis"]}


@dataclass
class Candidate:
    checkout: Path
    changed: list[str]
    built: bool
    tests: subprocess.CompletedProcess[str]

    @property
    def binary(self) -> Path:
        return self.checkout / demo.BINARY


def build(checkout: Path) -> bool:
    return run(["make", "-s", f"PYTHON={sys.executable}"], checkout).returncode == 0


def unit_tests(checkout: Path) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", "unittest", "discover", "-s", "tests"], checkout)


@dataclass
class Lab:
    root: Path
    target: Path  # the template's repository, built: the baseline
    bench: Path
    env: dict[str, str]
    candidates: dict[str, Candidate] = field(default_factory=dict)

    def candidate(self, hypothesis: str, base: Path | None = None, name: str | None = None) -> Candidate:
        """Clone `base` (default: the template), apply the hypothesis's patch, build, test."""
        name = name or hypothesis
        if name not in self.candidates:
            checkout = self.root / name
            git(self.root, "clone", "-q", str(base or self.target), str(checkout))
            git(checkout, "apply", str(demo.HERE / hypotheses()[hypothesis]["patch"]))
            changed = sorted(line[3:] for line in git(checkout, "status", "--porcelain", "-uall").splitlines())
            self.candidates[name] = Candidate(checkout, changed, build(checkout), unit_tests(checkout))
        return self.candidates[name]

    def verdict(self, candidate: Path, baseline: Path | None = None) -> dict:
        result = orchard(
            "verdict", "--suite", self.bench / "suite.toml",
            "--baseline", baseline or self.target / demo.BINARY, "--candidate", candidate,
            "--runs", RUNS, "--json", "--results", self.root / "results", env=self.env,
        )
        assert result.returncode in (0, 1), result.stderr
        return json.loads(result.stdout)

    def report(self, binary: Path) -> str:
        """The binary's report on the suite's large corpus."""
        corpus = self.root / "corpus.txt"
        if not corpus.exists():
            run([sys.executable, str(self.bench / "fixtures" / "make_corpus.py"),
                 "--words", "2000", "--out", str(corpus)], self.root).check_returncode()
        result = run([str(binary), str(corpus)], self.root)
        assert result.returncode == 0, result.stderr
        return result.stdout


@pytest.fixture(scope="module")  # ~12 s: every test that takes it is in the slow tier
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    """The template as a built repository, the bench as another, and one A/A calibration."""
    root = tmp_path_factory.mktemp("demo-content")
    target = repository(demo.TARGET, root / "template")
    assert build(target)
    bench = repository(demo.BENCH, root / "bench")
    env = {"ORCHARD_CACHE_DIR": str(root / "cache"), "ORCHARD_LOCK_FILE": str(session_lock_file(tmp_path_factory))}
    calibrated = orchard(
        "calibrate", "--suite", bench / "suite.toml", "--baseline", target / demo.BINARY,
        "--runs", RUNS, "--results", root / "results", env=env,
    )
    assert calibrated.returncode == 0, calibrated.stderr
    return Lab(root, target, bench, env)


def metric(report: dict, key: str) -> dict:
    return next(m for m in report["metrics"] if m["key"] == key)


def failed_gates(report: dict) -> list[str]:
    return [g["name"] for g in report["gates"] if not g["passed"]]


TIMES = ("report/wall_ms", "report/cpu_ms")


def claimed_on_time_alone(report: dict) -> bool:
    """Whether the verdict's only claims beyond what the patch changes are on time: for a patch with no effect on
    time, a claim there is the verdict's false-alarm rate, which a loaded machine raises (ci27 beside a CPU
    burner: terse-report, a bytes win, REGRESSED on `report/wall_ms` +11.57%). What must hold whatever the noise
    is the rest: its reasons are all on time, no gate failed."""
    claims = [m for m in report["metrics"] if m["verdict"] in ("improved", "regressed") and m["key"] in TIMES]
    return bool(claims) and failed_gates(report) == [] and all(
        any(reason.startswith(m["key"]) for m in claims) for reason in report["reasons"])


def passes_but_for_time_noise(report: dict) -> bool:
    """PASS, or REGRESSED on time alone (see `claimed_on_time_alone`): a bytes win's verdict whatever the noise."""
    return report["verdict"] == "PASS" or (report["verdict"] == "REGRESSED" and claimed_on_time_alone(report))


def in_scope(path: str, scope: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(path, entry) or path.startswith(entry.rstrip("/") + "/") for entry in scope)


def test_the_backlog_has_one_hypothesis_per_path_in_the_documented_format() -> None:
    found = hypotheses()
    assert sorted(found) == sorted(OUTCOMES)
    suite_keys = {m.key for m in load_suite(demo.BENCH / "suite.toml").metrics}
    for hypothesis in found.values():
        assert set(hypothesis) <= DOCUMENTED_KEYS, hypothesis["id"]
        assert hypothesis["metric"] in suite_keys, hypothesis["id"]
        assert hypothesis["lane"] in ("exploit", "explore")
        assert 1 <= hypothesis["impact"] <= 5 and 1 <= hypothesis["effort"] <= 5
        assert 0 < hypothesis["confidence"] <= 1
        assert hypothesis["scope"] and (demo.HERE / hypothesis["patch"]).is_file()
        assert any(hypothesis["suspected_cause"].startswith(entry) for entry in hypothesis["scope"]), hypothesis["id"]
    assert any(h["lane"] == "explore" for h in found.values())
    # the two wins rank first, so they start together and the second must be rebased
    score = {h["id"]: h["impact"] * h["confidence"] / h["effort"] for h in found.values()}
    exploit = sorted((h for h in found if found[h]["lane"] == "exploit"), key=lambda h: -score[h])
    assert exploit[:2] == ["count-with-dict", "terse-report"]


def test_the_lab_reads_the_demo_backlog() -> None:
    backlog = pytest.importorskip("orchard.lab.loop.backlog", reason="the lab's hypothesis parser is not built yet")
    assert sorted(h.id for h in backlog.load_file(demo.HYPOTHESES)) == sorted(OUTCOMES)


@pytest.mark.slow
def test_template_and_bench_tests_pass_and_leave_both_clean(lab: Lab) -> None:
    assert unit_tests(lab.target).returncode == 0
    assert unit_tests(lab.bench).returncode == 0
    # build output and bytecode are ignored: a worker's clone only shows its own edits
    assert git(lab.target, "status", "--porcelain") == git(lab.bench, "status", "--porcelain") == ""
    report = lab.report(lab.target / demo.BINARY)
    scenario = load_suite(lab.bench / "suite.toml").scenario("report")
    assert all(fact in report for fact in scenario.expect)


@pytest.mark.slow
def test_every_patch_applies_after_both_wins_in_either_order(lab: Lab) -> None:
    wins = ["count-with-dict", "terse-report"]
    for order in (wins, wins[::-1]):
        checkout = lab.root / ("main-" + "-then-".join(order))
        git(lab.root, "clone", "-q", str(lab.target), str(checkout))
        for hypothesis in order:
            git(checkout, "apply", str(demo.HERE / hypotheses()[hypothesis]["patch"]))
            git(checkout, "commit", "-q", "-am", hypothesis)
        for hypothesis in set(OUTCOMES) - set(wins):
            git(checkout, "apply", "--check", str(demo.HERE / hypotheses()[hypothesis]["patch"]))


@pytest.mark.slow  # the demo's timed win, measured
def test_count_with_dict_lands_on_wall_time(lab: Lab) -> None:
    candidate = lab.candidate("count-with-dict")
    assert candidate.built and candidate.tests.returncode == 0, candidate.tests.stderr
    report = lab.verdict(candidate.binary)
    assert report["verdict"] == "PASS", report["reasons"]
    # CPU time shows the win even when a loaded machine blurs wall time
    assert metric(report, "report/cpu_ms")["verdict"] == "improved"
    assert metric(report, "report/wall_ms")["verdict"] in ("improved", "inconclusive")
    size = metric(report, "report/stdout_bytes")
    assert (size["method"], size["verdict"]) == ("exact", "no-change")
    assert failed_gates(report) == []


@pytest.mark.slow  # held-out confirmation in the fast tier: test_anti_gaming's win beyond the bound
def test_terse_report_lands_on_output_size_with_every_fact_kept(lab: Lab) -> None:
    candidate = lab.candidate("terse-report")
    assert candidate.built and candidate.tests.returncode == 0, candidate.tests.stderr
    report = lab.verdict(candidate.binary)
    assert passes_but_for_time_noise(report), report["reasons"]
    for key in ("report/stdout_bytes", "top5/stdout_bytes"):
        size = metric(report, key)
        assert (size["method"], size["verdict"]) == ("exact", "improved")
        assert size["candidate_median"] < size["baseline_median"]
    assert failed_gates(report) == []
    # about 13x smaller, beyond the suite's plausible bound: the held-out corpus confirms it
    size = metric(report, "report/stdout_bytes")
    assert size["baseline_median"] / size["candidate_median"] > load_suite(lab.bench / "suite.toml").plausible
    unseen = metric(report, "unseen/stdout_bytes")
    assert unseen["note"].startswith("held-out") and unseen["verdict"] == "improved"


@pytest.mark.slow
def test_terse_report_is_still_a_win_rebased_onto_main_after_the_time_win(lab: Lab) -> None:
    moved = lab.root / "main-moved"
    git(lab.root, "clone", "-q", str(lab.target), str(moved))
    git(moved, "apply", str(demo.HERE / hypotheses()["count-with-dict"]["patch"]))
    git(moved, "commit", "-q", "-am", "land count-with-dict")
    assert build(moved)
    candidate = lab.candidate("terse-report", base=moved, name="terse-report-rebased")
    assert candidate.built and candidate.tests.returncode == 0, candidate.tests.stderr
    report = lab.verdict(candidate.binary, baseline=moved / demo.BINARY)
    assert passes_but_for_time_noise(report), report["reasons"]
    assert metric(report, "report/stdout_bytes")["verdict"] == "improved"


@pytest.mark.slow
def test_top_ten_default_shrinks_the_output_but_is_regressed_by_information_recall(lab: Lab) -> None:
    candidate = lab.candidate("top-ten-default")
    assert candidate.built and candidate.tests.returncode == 0, candidate.tests.stderr
    assert len(lab.report(candidate.binary)) < len(lab.report(lab.target / demo.BINARY))
    report = lab.verdict(candidate.binary)
    assert report["verdict"] == "REGRESSED"
    assert set(failed_gates(report)) == {"information_recall"}  # the held-out scenario loses ranks 11-20 too
    assert any("information_recall" in reason for reason in report["reasons"])


@pytest.mark.slow
def test_single_write_has_no_effect_above_the_noise_floor(lab: Lab) -> None:
    candidate = lab.candidate("single-write")
    assert candidate.built and candidate.tests.returncode == 0, candidate.tests.stderr
    assert lab.report(candidate.binary) == lab.report(lab.target / demo.BINARY)
    report = lab.verdict(candidate.binary)
    assert report["verdict"] in ("NO-CHANGE", "INCONCLUSIVE") or claimed_on_time_alone(report), report["reasons"]
    assert failed_gates(report) == []
    for key in ("report/stdout_bytes", "top5/stdout_bytes"):
        assert metric(report, key)["verdict"] == "no-change"


@pytest.mark.slow
def test_longest_word_one_pass_fails_the_unit_tests_only(lab: Lab) -> None:
    candidate = lab.candidate("longest-word-one-pass")
    assert candidate.built
    assert candidate.tests.returncode != 0
    assert "test_longest_word_ties_break_alphabetically" in candidate.tests.stderr
    # the bench's corpus has one longest word: only the tests can catch this
    assert lab.report(candidate.binary) == lab.report(lab.target / demo.BINARY)


@pytest.mark.slow
def test_tokenize_regex_edits_a_test_outside_its_scope(lab: Lab) -> None:
    hypothesis = hypotheses()["tokenize-regex"]
    candidate = lab.candidate("tokenize-regex")
    outside = [path for path in candidate.changed if not in_scope(path, hypothesis["scope"])]
    assert outside == ["tests/test_tokenize.py"]
    # the edited test is what makes the suite pass: the original test fails on the patched code
    git(candidate.checkout, "checkout", "--", "tests/test_tokenize.py")
    assert unit_tests(candidate.checkout).returncode != 0
    assert candidate.tests.returncode == 0


@pytest.mark.slow
def test_read_whole_file_stays_in_scope_but_modifies_the_bench(lab: Lab) -> None:
    hypothesis = hypotheses()["read-whole-file"]
    candidate = lab.candidate("read-whole-file")
    assert candidate.changed and all(in_scope(path, hypothesis["scope"]) for path in candidate.changed)
    assert candidate.built and candidate.tests.returncode == 0, candidate.tests.stderr
    bench_clone = lab.root / "bench-clone"
    git(lab.root, "clone", "-q", str(lab.bench), str(bench_clone))
    git(bench_clone, "apply", str(demo.HERE / hypothesis["bench_patch"]))
    assert git(bench_clone, "status", "--porcelain").split() == ["M", "suite.toml"]
    # a worker's bench is the copy without the held-out inputs: the bench patch applies there too
    view = lab.root / "bench-view"
    git(lab.root, "clone", "-q", str(lab.bench), str(view))
    assert withhold(view / "suite.toml") == ["fixtures/hidden/unseen.facts", "suite.toml"]
    git(view, "apply", str(demo.HERE / hypothesis["bench_patch"]))
    assert '"--words", "1000"' in (view / "suite.toml").read_text()
