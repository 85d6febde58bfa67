"""Shared-baseline campaigns: K candidates judged against one baseline run per round, one verdict each."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from orchard.bench.campaigns.shared_campaign import SharedVerdicts, run_shared_verdicts
from orchard.bench.deciding.decide import AdaptivePlan
from orchard.bench.deciding.verdict import VerdictWord
from orchard.bench.suites.suite_reader import load_suite
from orchard.jsonlines import read_jsonl
from tests.helpers import make_binary

SUITE = """
[suite]
name = "shared"
runs = 8
min_runs = 8
calibration_runs = 8
confine = false

[[scenario]]
name = "loop"
command = ["{bin}"]

[[metric]]
name = "cpu_ms"
floor = 1.0
"""
# The identical copy must never be claimed REGRESSED, whatever the load beside the test: on wall time it was, about
# once a hundred campaigns (+70% in a fast tier: in 7 of 9 rounds the copy's run took 1.1-3x the baseline's wall
# time for the same CPU time, waiting for a CPU the test's neighbours held). CPU time does not count that wait, and no
# noise doubles an identical program's CPU time in most pairs, so a floor of +100% keeps the copy unclaimed while ten
# times the work (`slow`) clears it at the first look.


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("shared")
    make_binary(directory, "base", iterations=3000)
    make_binary(directory, "same", iterations=3000)
    make_binary(directory, "slow", iterations=3000 * 10)  # ten times the work: clear of the floor at once
    make_binary(directory, "broken", iterations=3000, code=3)
    (directory / "suite.toml").write_text(SUITE)
    return directory


def _campaign(bench: Path, names: list[str], seed: int, tmp_path: Path) -> SharedVerdicts:
    suite = load_suite(bench / "suite.toml")
    return run_shared_verdicts(suite, bench / "base", [bench / name for name in names], seed=seed,
                               results=tmp_path / "results", calibration_file=tmp_path / "calibration.json")


@pytest.fixture(scope="module")
def three(bench: Path, tmp_path_factory: pytest.TempPathFactory) -> SharedVerdicts:
    """One campaign of an identical copy, a slower candidate and one that fails its runs."""
    return _campaign(bench, ["same", "slow", "broken"], 7, tmp_path_factory.mktemp("three"))


def _measured(result: SharedVerdicts) -> list[dict]:
    rows = read_jsonl(result.verdicts[0].rows)
    return [row for row in rows if row.get("step_kind") != "verdict"]


def test_each_candidate_gets_its_own_verdict_and_stops_on_its_own_rule(three: SharedVerdicts, bench: Path) -> None:
    same, slow, broken = three.verdicts
    assert [v.candidate for v in three.verdicts] == [bench / "same", bench / "slow", bench / "broken"]
    assert all(v.baseline == bench / "base" for v in three.verdicts)
    why = {v.candidate.name: (v.verdict, v.reasons) for v in three.verdicts}  # shown if a check below fails
    assert broken.verdict == VerdictWord.REGRESSED, why
    assert broken.failed_gates[0].name == "exit_status", why
    assert broken.pairs == 0  # stopped at the warm-up round while the others went on
    assert slow.verdict == VerdictWord.REGRESSED, why
    assert same.verdict != VerdictWord.REGRESSED, why
    assert same.reasons[-1] == "judged beside 2 other candidates on shared baseline runs, at its own alpha as alone"
    # the baseline kept running while any candidate was undecided
    assert three.rounds == max(same.pairs or 0, slow.pairs or 0)


def test_a_round_runs_the_baseline_once_and_every_live_candidate_once(three: SharedVerdicts) -> None:
    rows = _measured(three)
    per_round = Counter(row["pair"] for row in rows)
    # the warm-up round has all three candidates, then each runs until it stops
    live = {index: 1 + sum((v.pairs or 0) >= index for v in three.verdicts) for index in range(1, three.rounds + 1)}
    assert per_round == {0: 4, **live}
    assert three.runs == len(rows)  # K+1 runs a round while K candidates are live, instead of 2K
    assert all(Counter(row["subject"] for row in rows if row["pair"] == index)["baseline"] == 1 for index in per_round)


def test_the_order_is_seeded_random_and_recorded(three: SharedVerdicts) -> None:
    """Each round's order is the seeded generator's next shuffle of the baseline and the live candidates: the
    campaign replays from its seed."""
    rows = _measured(three)
    orders = [row["order"] for row in rows if row["subject"] == "baseline"]
    rng = random.Random(three.seed)
    replayed = []
    for index in range(three.rounds + 1):
        names = ["baseline", *sorted({row["subject"] for row in rows if row["pair"] == index} - {"baseline"})]
        rng.shuffle(names)
        replayed.append("-".join(names))
    assert orders == replayed
    assert len(set(orders)) > 1  # not a fixed order


def test_each_candidate_has_the_looks_and_alpha_of_a_campaign_of_its_own(three: SharedVerdicts, bench: Path,
                                                                          tmp_path: Path) -> None:
    """A candidate's verdict does not depend on how many others waited beside it: no split of alpha, the same
    looks and the same extra pairs past `runs` as alone (before: alpha / K and 12 rounds here)."""
    (alone,) = _campaign(bench, ["slow"], 3, tmp_path).verdicts
    assert alone.planned_pairs == 16  # runs 8, and as many again for a metric still open there
    assert [v.planned_pairs for v in three.verdicts] == [16, 16, 16]
    slow = three.verdicts[1]
    # its interval at a lone campaign's level for its look, not at a third of it (an exact interval's confidence is
    # the first attainable one at or above what was asked)
    level = AdaptivePlan(8, 8, 0.05, 8).alpha_at(slow.pairs or 0)
    assert level is not None
    assert 1 - level <= (slow.metrics[0].confidence or 0) < 1 - level / 3


def test_one_candidate_is_exactly_a_campaign_of_its_own(bench: Path, tmp_path: Path) -> None:
    (result,) = _campaign(bench, ["slow"], 3, tmp_path).verdicts
    assert result.verdict == VerdictWord.REGRESSED
    assert not any("shared baseline" in reason for reason in result.reasons)
    rows = [row for row in read_jsonl(result.rows) if row.get("step_kind") != "verdict"]
    assert {row["role"] for row in rows} == {"baseline", "candidate"}
    # a warm-up pair, then as many pairs as the verdict says (8 on a quiet machine; more when the load keeps it open)
    assert result.pairs is not None and result.pairs >= 8
    assert Counter(row["pair"] for row in rows) == dict.fromkeys(range(result.pairs + 1), 2)


@pytest.mark.parametrize("count", [1, 2])
def test_the_renamed_copy_runs_in_the_warm_up_round_only_and_the_count_of_runs_says_so(tmp_path: Path,
                                                                                      count: int) -> None:
    """The renamed copy of an input (its own bytes) beside a content variant is checked once, untimed: its runs
    are the warm-up round's, the content variant's go on with its scenario, and `runs` counts what ran."""
    directory = tmp_path / "bench"
    directory.mkdir()
    (directory / "input.txt").write_text("one\ntwo\n\nthree\nfour\n\nfive\n")
    (directory / "suite.toml").write_text(SUITE.replace('["{bin}"]', '["{bin}", "{suite_dir}/input.txt"]'))
    base = make_binary(directory, "base", iterations=3000)
    candidates = [make_binary(directory, f"same-{k}", iterations=3000) for k in range(count)]
    result = run_shared_verdicts(load_suite(directory / "suite.toml"), base, candidates, seed=5,
                                 results=tmp_path / "results", calibration_file=tmp_path / "calibration.json")
    rows = _measured(result)
    pairs: dict[str, set[int]] = {}
    for row in rows:
        pairs.setdefault(row["scenario"], set()).add(row["pair"])
    assert pairs["loop~rename"] == {0}
    assert pairs["loop~shuffle-paragraphs+duplicate-paragraph"] == pairs["loop"] and len(pairs["loop"]) > 1
    assert result.runs == len(rows)
    report = result.verdicts[0].variants
    assert report is not None and {c.perturbation: c.timed for c in report.checks} == {
        "rename": False, "shuffle-paragraphs+duplicate-paragraph": True}
