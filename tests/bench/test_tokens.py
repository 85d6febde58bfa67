"""Token estimates: ceil(chars/4) of the command plus the admitted output."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchard.bench.measuring import tokens
from orchard.bench.measuring.rows import step_row, total_row
from orchard.process import run

SUBJECT = {"name": "tool", "kind": "command"}


@pytest.mark.parametrize(
    ("chars", "expected"),
    [(0, 0), (1, 1), (3, 1), (4, 1), (5, 2), (8, 2), (9, 3), (4001, 1001)],
)
def test_estimate_is_ceil_of_chars_over_four(chars: int, expected: int) -> None:
    assert tokens.estimate(chars) == expected


@given(st.integers(min_value=1, max_value=10**9))
def test_estimate_never_undercounts_by_a_token(chars: int) -> None:
    estimate = tokens.estimate(chars)
    assert 4 * (estimate - 1) < chars <= 4 * estimate


def test_interaction_counts_the_command_and_the_admitted_output() -> None:
    fields = tokens.interaction_fields(
        "git status",  # 10 chars -> 3 tokens
        "x" * 41,
        "y" * 7,  # 48 admitted chars -> 12 tokens
        stdout_bytes=41,
        stderr_bytes=7,
        stdout_truncated=False,
        stderr_truncated=False,
    )
    assert fields["admitted_output_chars"] == 48
    assert fields["estimated_input_tokens"] == 3
    assert fields["estimated_output_tokens"] == 12
    assert fields["estimated_total_tokens"] == 15
    assert "ceil(chars/4)" in fields["token_estimate_method"]


def test_a_real_truncated_run_estimates_what_was_admitted_and_keeps_the_raw_bytes() -> None:
    code = "import sys; sys.stdout.write('o' * 50_000); sys.stderr.write('e' * 30)"
    command = [sys.executable, "-c", code]
    capture = run(command, admitted_chars=1_000)
    row = step_row(capture, subject=SUBJECT, scenario="s", operation="op", run=1, metadata={})
    assert row["stdout_bytes"] == 50_000 and row["stderr_bytes"] == 30
    assert row["stdout_truncated"] is True and row["stderr_truncated"] is False
    assert row["admitted_output_chars"] == 1_030
    assert row["estimated_output_tokens"] == 258  # ceil(1030 / 4)
    assert row["estimated_input_tokens"] == tokens.estimate(len(row["command"]))
    assert row["estimated_total_tokens"] == row["estimated_input_tokens"] + 258


def test_output_is_counted_in_characters_not_bytes() -> None:
    capture = run([sys.executable, "-c", "print('é' * 10, end='')"], env={"PYTHONIOENCODING": "utf-8"})
    row = step_row(capture, subject=SUBJECT, scenario="s", operation="op", run=1, metadata={})
    assert row["stdout_bytes"] == 20
    assert row["admitted_output_chars"] == 10
    assert row["estimated_output_tokens"] == 3


def _step(**fields: object) -> dict[str, object]:
    return {"operation": "op", "returncode": 0, "elapsed_ms": 1.0, **fields}


def test_summed_totals_add_every_step() -> None:
    steps = [
        _step(**tokens.interaction_fields("a" * 8, "b" * 9, "", stdout_bytes=9, stderr_bytes=0,
                                          stdout_truncated=False, stderr_truncated=False)),
        _step(**tokens.interaction_fields("c" * 4, "d" * 100, "e", stdout_bytes=500, stderr_bytes=1,
                                          stdout_truncated=True, stderr_truncated=False)),
    ]
    totals = tokens.summed_fields(steps)
    assert totals["estimated_input_tokens"] == 2 + 1
    assert totals["estimated_output_tokens"] == 3 + 26
    assert totals["estimated_total_tokens"] == 32
    assert totals["admitted_output_chars"] == 9 + 101
    assert totals["stdout_bytes"] == 509 and totals["stderr_bytes"] == 1
    assert totals["stdout_truncated"] is True and totals["stderr_truncated"] is False


def test_summed_totals_keep_null_as_null() -> None:
    totals = tokens.summed_fields([_step(estimated_total_tokens=None), _step()])
    for field in (*tokens.TOKEN_FIELDS, "stdout_bytes", "stderr_bytes"):
        assert totals[field] is None, field


def test_a_total_with_one_unmeasured_step_is_unmeasured_not_understated() -> None:
    measured = _step(estimated_total_tokens=40, stdout_bytes=10)
    unmeasured = _step(estimated_total_tokens=None, stdout_bytes=None)
    totals = tokens.summed_fields([measured, unmeasured])
    assert totals["estimated_total_tokens"] is None
    assert totals["stdout_bytes"] is None


def test_zero_is_a_measurement_and_sums_as_zero() -> None:
    totals = tokens.summed_fields([_step(estimated_total_tokens=0), _step(estimated_total_tokens=0)])
    assert totals["estimated_total_tokens"] == 0


def test_a_total_row_sums_the_tokens_of_its_real_steps() -> None:
    steps = [
        step_row(run(["printf", "x" * n]), subject=SUBJECT, scenario="s", operation=f"op{n}", run=1, metadata={})
        for n in (3, 17)
    ]
    total = total_row(steps, subject=SUBJECT, scenario="s", operation="total", run=1, metadata={})
    assert total["estimated_total_tokens"] == sum(step["estimated_total_tokens"] for step in steps)
    assert total["admitted_output_chars"] == 20
    assert total["stdout_bytes"] == 20
    assert total["tool_call_count"] == 2
