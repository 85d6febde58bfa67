"""`--fail-on regressed|inconclusive|any`: how strict a CI job is, on real verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest

from orchard.bench.deciding.policy import FailOn
from orchard.bench.deciding.verdict import VerdictWord
from orchard.cli import verdict_commands
from tests.helpers import orchard

# a harness binary printing one JSON row; "wobbly" alternates +-10% between runs
STEADY = "#!/bin/sh\necho '{{\"score\": {value}}}'\n"
WOBBLY = """#!/bin/sh
count=$(cat "$0.count" 2>/dev/null || echo 0)
echo $((count + 1)) > "$0.count"
if [ $((count % 2)) -eq 0 ]; then echo '{"score": 110}'; else echo '{"score": 90}'; fi
"""
SUITE = """
[suite]
name = "policy"
runs = 6
min_runs = 6
calibration_runs = 6

[[scenario]]
name = "score"
kind = "rows"
command = ["{bin}"]

[[metric]]
name = "score"
floor = 0.01
"""


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    for name, text in (
        ("base", STEADY.format(value=100)),
        ("better", STEADY.format(value=50)),
        ("worse", STEADY.format(value=200)),
        ("wobbly", WOBBLY),
    ):
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(0o755)
    (tmp_path / "suite.toml").write_text(SUITE)
    return tmp_path


# candidate -> its verdict -> the exit code under each policy
CASES = [
    ("base", "NO-CHANGE", {"regressed": 0, "inconclusive": 0, "any": 0}),
    ("better", "PASS", {"regressed": 0, "inconclusive": 0, "any": 1}),
    ("wobbly", "INCONCLUSIVE", {"regressed": 0, "inconclusive": 1, "any": 1}),
    ("worse", "REGRESSED", {"regressed": 1, "inconclusive": 1, "any": 1}),
]


@pytest.mark.parametrize(("verdict", "codes"), [case[1:] for case in CASES])
def test_each_policy_fails_exactly_the_verdicts_it_names(verdict: str, codes: dict[str, int]) -> None:
    assert {policy: int(FailOn(policy).fails(VerdictWord(verdict))) for policy in codes} == codes


@pytest.mark.slow  # four real verdicts per case (the policy table alone: the test above)
@pytest.mark.parametrize(("candidate", "verdict", "codes"), CASES)
def test_fail_on_picks_the_exit_code(lab: Path, candidate: str, verdict: str, codes: dict[str, int]) -> None:
    for policy, expected in codes.items():
        result = orchard(
            "verdict",
            "--suite",
            "suite.toml",
            "--baseline",
            "base",
            "--candidate",
            candidate,
            "--json",
            "--fail-on",
            policy,
            "--no-confine",  # "wobbly" keeps its count beside itself: state a confined run may not carry
            cwd=lab,
        )
        assert json.loads(result.stdout)["verdict"] == verdict, result.stderr
        assert result.returncode == expected, (policy, result.stderr)
    default = orchard("verdict", "--suite", "suite.toml", "--baseline", "base", "--candidate", candidate,
                      "--no-confine", cwd=lab)
    assert default.returncode == codes["regressed"]


def test_an_unknown_policy_is_a_usage_error(lab: Path) -> None:
    result = orchard(
        "verdict",
        "--suite",
        "suite.toml",
        "--baseline",
        "base",
        "--candidate",
        "base",
        "--fail-on",
        "sometimes",
        cwd=lab,
    )
    assert result.returncode == 2 and "--fail-on" in result.stderr


def test_error_fails_under_every_policy() -> None:
    assert all(policy.fails(VerdictWord.ERROR) for policy in FailOn)


def test_the_command_line_offers_every_policy_and_no_other() -> None:
    for command in (verdict_commands.verdict, verdict_commands.compare):
        option = next(param for param in command.params if param.name == "fail_on")
        assert isinstance(option.type, click.Choice)
        assert list(option.type.choices) == [policy.value for policy in FailOn]
