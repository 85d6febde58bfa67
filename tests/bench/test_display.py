"""The verdict as a terminal shows it: readable at 80 and 120 columns, numbers in units people read."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from orchard.bench.deciding.decide import decide_metrics, overall
from orchard.bench.deciding.verdict import (
    Direction,
    GateResult,
    MetricNoise,
    MetricResult,
    MetricSpec,
    MetricVerdict,
    VerdictDecision,
    VerdictWord,
)
from orchard.bench.results.display import print_decision


def _metric(scenario: str, metric: str, verdict: MetricVerdict, baseline: float, candidate: float) -> MetricResult:
    return MetricResult(
        scenario=scenario, metric=metric, direction="lower", target=True, verdict=verdict, method="hodges-lehmann",
        scale="log-ratio", effect=candidate / baseline - 1, interval=(-0.0213, 0.0456), confidence=0.95,
        floor=0.348, n=20, mde=0.0512, baseline_median=baseline, candidate_median=candidate,
    )


DECISION = VerdictDecision(
    VerdictWord.INCONCLUSIVE,
    [
        _metric("render-large-table", "wall_ms", MetricVerdict.UNCLEAR, 0.0624, 0.0631),
        _metric("render-large-table", "instructions", MetricVerdict.UNCLEAR, 245_242_011.0, 245_300_000.0),
        _metric("render-large-table", "peak_rss_bytes", MetricVerdict.UNCHANGED, 232_087.0, 232_087.0),
    ],
    reasons=["render-large-table/wall_ms: interval [-2.13%, +4.56%] is wider than the floor"],
)


def _shown(width: int) -> str:
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    print_decision(console, DECISION, [])
    return console.export_text()


@pytest.mark.parametrize("width", [80, 120])
def test_the_verdict_fits_a_narrow_terminal_with_every_cell_whole(width: int) -> None:
    text = _shown(width)
    assert max(len(line) for line in text.splitlines()) <= width, text
    assert "…" not in text, f"a cell was cut at {width} columns:\n{text}"
    assert text.count("inconclusive") == 2 and "no-change" in text, text
    assert text.count("34.80%") == 3 and "20" in text, f"floor and n are shown:\n{text}"
    assert "e+0" not in text, text
    for value in ("62.4 µs", "63.1 µs", "245.2 M", "245.3 M", "232.1 KB"):
        assert value in text, (value, text)


def test_a_wide_terminal_gets_the_table() -> None:
    text = _shown(200)
    header = next(line for line in text.splitlines() if "metric" in line)
    columns = ["metric", "verdict", "effect", "interval", "floor", "n", "MDE", "baseline", "candidate"]
    assert header.replace("┃", " ").split() == columns
    assert "62.4 µs" in text and "e+0" not in text


def test_bracketed_text_in_reasons_gates_and_warnings_is_printed_as_written() -> None:
    """Reasons quote config keys (`[workers] sandbox`) and a worker's own words; rich would take them for
    markup, dropping `[workers]` and stopping the lab's output at a stray `[/x]`."""
    gate = GateResult(name="determinism", passed=False, detail="report [/x] differs")
    decision = VerdictDecision(VerdictWord.REGRESSED, gates=[gate], reasons=["set [workers] sandbox = \"none\" [/]"])
    console = Console(width=200, file=io.StringIO(), record=True, color_system=None)
    print_decision(console, decision, ["scenario [bold]top5[/bold] ran once"])
    text = console.export_text()
    for written in ("report [/x] differs", "set [workers] sandbox = \"none\" [/]", "[bold]top5[/bold]"):
        assert written in text, text


def _decided() -> VerdictDecision:
    """A candidate 1.87x faster in wall time, with runs spread around both medians, as the verdict decides it."""
    spec = MetricSpec("report", "wall_ms", Direction.LOWER)
    base = [50.0, 52.0, 48.0, 51.0, 49.0, 53.0, 47.0, 50.0]
    samples = {spec.key: (base, [v / 1.87 for v in base])}
    return overall(decide_metrics([spec], samples, {spec.key: MetricNoise(0.03, False, 0.01)}, 0.05), [])


@pytest.mark.parametrize("width", [80, 200])
def test_the_verdict_shows_mean_sd_and_range_beside_the_median_and_the_ratio(width: int) -> None:
    """What hyperfine and pyperf users read first: mean ± σ, min … max and `1.87x faster`."""
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    print_decision(console, _decided(), [])
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= width, text
    assert "1.87x faster" in text and "-46.52%" in text, text
    assert "mean ± σ" in text and "min … max" in text, text
    for value in ("50.0 ms ± 2.00 ms", "47.0 ms … 53.0 ms", "26.7 ms ± 1.07 ms", "25.1 ms … 28.3 ms"):
        assert value in text, (value, text)


@pytest.mark.parametrize("width", [80, 200])
def test_the_interval_says_what_its_level_is(width: int) -> None:
    """`@95%` read as a price or an address; the label says it is the interval's confidence."""
    text = _shown(width)
    assert text.count("95% confidence") == 3 and "@" not in text, text
