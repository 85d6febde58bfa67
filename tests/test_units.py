"""One formatter per kind of number: the same value reads the same in every table and page."""

from __future__ import annotations

import pytest

from orchard.units import big_count, count, duration_ms, exact_quantity, quantity, size_bytes, times, unit, usd


@pytest.mark.parametrize(("ms", "shown"), [
    (0.0008, "800 ns"), (0.0624, "62.4 µs"), (1.234, "1.23 ms"), (245.24, "245 ms"), (999.96, "1.00 s"),
    (2452.4, "2.45 s"), (3_600_000.0, "3,600 s"), (None, "-"), (float("nan"), "-"),
])
def test_durations_scale_from_nanoseconds_to_seconds(ms: float | None, shown: str) -> None:
    assert duration_ms(ms) == shown


@pytest.mark.parametrize(("size", "shown"), [
    (512, "512 B"), (999.6, "1.0 KB"), (290_600, "290.6 KB"), (12_345_678, "12.3 MB"), (1.5e9, "1.50 GB"),
])
def test_sizes_scale_from_bytes_to_gigabytes(size: float, shown: str) -> None:
    assert size_bytes(size) == shown


def test_a_count_has_separators_whether_it_came_as_int_or_float() -> None:
    assert count(232087) == count(232087.0) == "232,087"
    assert count(0.33333) == "0.3333" and count(7) == "7"


def test_instruction_counts_read_in_millions_never_with_an_exponent() -> None:
    assert big_count(245_242_011.0) == "245.2 M" and big_count(1.3e9) == "1.3 G" and big_count(9_999) == "9,999"
    assert quantity(245_242_011.0, "scenario/instructions") == "245.2 M"
    assert quantity(2_000_000.0, "estimated_cycles") == "2.0 M"


def test_a_metric_picks_its_unit_by_name_and_an_exact_value_keeps_every_digit() -> None:
    assert quantity(0.0624, "report/wall_ms") == "62.4 µs"
    assert quantity(232_087.0, "peak_rss_bytes") == "232.1 KB"
    assert quantity(1234.0, "rows_written") == "1,234"
    assert exact_quantity(11_502.0, "report/stdout_bytes") == "11,502 B"
    assert exact_quantity(245_242_011.0, "instructions") == "245,242,011"


def test_almost_nothing_below_zero_prints_without_a_sign() -> None:
    assert duration_ms(-1e-12) == "0.00 ns"
    assert size_bytes(-1e-9) in ("0 B", "0.00 B")
    assert duration_ms(-0.5) == "-500 µs"


def test_nothing_spent_is_zero_dollars_however_it_was_reported() -> None:
    """A run that failed on 500s printed "0" as its cost, one that never reached its model none: both "$0"."""
    assert usd(0) == usd(0.0) == "$0"
    assert usd(0.0625) == "$0.0625"


def test_a_ratio_reads_as_hyperfine_prints_it() -> None:
    """Candidate over baseline: `1.87x faster` for a duration, smaller or larger for anything else."""
    assert times(1 / 1.87, "report/wall_ms") == "1.87x faster"
    assert times(1.12, "cpu_ms") == "1.12x slower"
    assert times(1 / 13.4, "report/stdout_bytes") == "13.4x smaller"
    assert times(1.2, "instructions") == "1.20x larger"
    assert times(1.001, "wall_ms") == "1.00x"
    assert times(None, "wall_ms") == times(0.0, "wall_ms") == "-"
    assert unit("report/wall_ms") == "ms" and unit("stdout_bytes") == "B" and unit("instructions") == "count"
