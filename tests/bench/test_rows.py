"""Rows: a failed command is never mistaken for a skip."""

from __future__ import annotations

from orchard.bench.measuring.rows import SKIP_RETURNCODE, is_failure, is_skip, skip_row, step_row, total_row
from orchard.process import run

SUBJECT = {"name": "tool", "kind": "command"}


def test_a_command_failing_with_77_is_a_failure_not_a_skip() -> None:
    step = step_row(run("exit 77"), subject=SUBJECT, scenario="s", operation="op", run=1, metadata={})
    assert is_failure(step) and not is_skip(step)
    assert step["process_returncode"] == SKIP_RETURNCODE
    total = total_row([step], subject=SUBJECT, scenario="s", operation="total", run=1, metadata={})
    assert total["returncode"] != 0
    assert total["coverage_complete"] is True


def test_a_skip_row_is_a_skip_with_its_reason_and_marks_the_total_incomplete() -> None:
    done = step_row(run("true"), subject=SUBJECT, scenario="s", operation="a", run=1, metadata={})
    skipped = skip_row(subject=SUBJECT, scenario="s", operation="b", run=1, metadata={}, reason="no oak binary")
    assert is_skip(skipped) and skipped["skip_reason"] == "no oak binary"
    total = total_row([done, skipped], subject=SUBJECT, scenario="s", operation="total", run=1, metadata={})
    assert total["returncode"] == 0
    assert total["coverage_complete"] is False
    assert total["unmeasured_operations"] == ["b"]


def test_77_is_success_when_the_scenario_expects_it() -> None:
    step = step_row(
        run("exit 77"), subject=SUBJECT, scenario="s", operation="op", run=1, metadata={}, expected_returncodes=(77,)
    )
    assert step["returncode"] == 0 and step["process_returncode"] == 77
