"""Shared-baseline campaigns: K candidates judged against one baseline run per round, one verdict each."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchard.bench.decide import AdaptivePlan
from orchard.bench.shared_campaign import SharedVerdicts, hopeless, run_shared_verdicts, shared_plan
from orchard.bench.suite_reader import load_suite
from orchard.bench.verdict import Direction, Method, MetricResult, MetricVerdict, Scale, VerdictWord
from orchard.jsonlines import read_jsonl
from tests.helpers import make_binary, session_lock_file

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
name = "wall_ms"
floor = 0.02
"""


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("shared")
    make_binary(directory, "base", iterations=3000)
    make_binary(directory, "same", iterations=3000)
    make_binary(directory, "slow", iterations=3000 * 3)  # three times the work: clear of any floor at once
    make_binary(directory, "broken", iterations=3000, code=3)
    (directory / "suite.toml").write_text(SUITE)
    return directory


def _campaign(bench: Path, names: list[str], seed: int, tmp_path: Path) -> SharedVerdicts:
    suite = load_suite(bench / "suite.toml")
    return run_shared_verdicts(suite, bench / "base", [bench / name for name in names], seed=seed,
                               results=tmp_path / "results", calibration_file=tmp_path / "calibration.json")


@pytest.fixture(scope="module")
def three(bench: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedVerdicts]:
    """One campaign of an identical copy, a slower candidate and one that fails its runs (under the test run's
    lock: the module's fixture comes before the autouse one that sets it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ORCHARD_LOCK_FILE", str(session_lock_file(tmp_path_factory)))
        yield _campaign(bench, ["same", "slow", "broken"], 7, tmp_path_factory.mktemp("three"))


def _measured(result: SharedVerdicts) -> list[dict]:
    rows = read_jsonl(result.verdicts[0].rows)
    return [row for row in rows if row.get("step_kind") != "verdict"]


def test_each_candidate_gets_its_own_verdict_and_stops_on_its_own_rule(three: SharedVerdicts, bench: Path) -> None:
    same, slow, broken = three.verdicts
    assert [v.candidate for v in three.verdicts] == [bench / "same", bench / "slow", bench / "broken"]
    assert all(v.baseline == bench / "base" for v in three.verdicts)
    assert broken.verdict == VerdictWord.REGRESSED and broken.failed_gates[0].name == "exit_status"
    assert broken.pairs == 0  # stopped at the warm-up round while the others went on
    assert slow.verdict == VerdictWord.REGRESSED
    assert same.verdict != VerdictWord.REGRESSED
    assert "alpha split 3 ways" in same.reasons[-1]
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


def test_alpha_is_split_across_candidates_and_the_rounds_buy_the_power_back() -> None:
    one = shared_plan(8, 20, 0.05, 1)
    assert one == AdaptivePlan(8, 20, 0.05)  # one candidate is today's campaign
    four = shared_plan(8, 20, 0.05, 4)
    assert four.max_runs == 32  # 20 x 2K / (K+1): never more runs than four campaigns of 20 pairs
    assert sum(four.alpha_at(n) or 0.0 for n in four.looks) == pytest.approx(0.05 / 4)
    assert four.max_runs * (4 + 1) <= 20 * 2 * 4


def test_one_candidate_is_exactly_a_campaign_of_its_own(bench: Path, tmp_path: Path) -> None:
    (result,) = _campaign(bench, ["slow"], 3, tmp_path).verdicts
    assert result.verdict == VerdictWord.REGRESSED
    assert not any("alpha split" in reason for reason in result.reasons)
    rows = [row for row in read_jsonl(result.rows) if row.get("step_kind") != "verdict"]
    assert {row["role"] for row in rows} == {"baseline", "candidate"}
    assert Counter(row["pair"] for row in rows) == dict.fromkeys(range(9), 2)


def test_only_a_candidate_that_may_yet_claim_gets_rounds_past_todays_cap() -> None:
    plan = shared_plan(8, 20, 0.05, 4)  # looks 8, 12, 18, 32: 18 is the last within today's 20 pairs

    def unclear(effect: float) -> list[MetricResult]:
        return [MetricResult("s", "wall_ms", Direction.LOWER, True, MetricVerdict.UNCLEAR, Method.HODGES_LEHMANN,
                             Scale.LOG_RATIO, effect, (effect - 0.05, effect + 0.05), 0.9, 0.02, 18, 0.04, 1.0, 1.0)]

    assert plan.looks == [8, 12, 18, 32]
    assert hopeless(plan, 18, 20, unclear(0.01))  # inside its floor: stops where its own campaign would
    assert not hopeless(plan, 18, 20, unclear(0.03))  # beyond its floor, unsettled: measured on
    assert not hopeless(plan, 12, 20, unclear(0.0))  # a later look within today's cap comes first
