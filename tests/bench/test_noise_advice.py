"""When wall time cannot decide (a floor or MDE wider than the smallest change that matters), the verdict says so
in one line naming what to measure instead, in every form it is shown in; when it can, it says nothing."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from orchard.bench.campaigns.campaign import cpu_share, timing_specs
from orchard.bench.checks.first_runs import RunSeries
from orchard.bench.deciding.decide import advise, decide_metrics, overall
from orchard.bench.deciding.noise_advice import Alternative
from orchard.bench.deciding.verdict import Direction, MetricNoise, MetricResult, MetricSpec, Verdict, VerdictWord
from orchard.bench.exports import markdown
from orchard.bench.measuring.measure import Observation
from orchard.bench.results.display import print_verdict, verdict_facts
from orchard.bench.suites.suite_reader import load_suite
from orchard.lab.judge.verdict_view import VerdictView, markdown_table
from orchard.lab.notebook.html_parts import verdict_html

WALL = MetricSpec("loop", "wall_ms", Direction.LOWER, min_floor=0.01)  # no_change_within 1%, the default
INSTRUCTIONS_LINE = 'measure = ["instructions"]'


def _judged(sd: float, floor: float) -> list[MetricResult]:
    """20 pairs of one unchanged program whose runs vary by `sd` (log scale), judged against an A/A `floor`."""
    rng = np.random.default_rng(11)
    baseline = 100.0 * np.exp(rng.normal(0, sd, 20))
    candidate = 100.0 * np.exp(rng.normal(0, sd, 20))
    noise = MetricNoise(floor=floor, deterministic=False, sd=sd)
    return decide_metrics([WALL], {WALL.key: (baseline.tolist(), candidate.tolist())}, {WALL.key: noise}, 0.05)


def _verdict(metrics: list[MetricResult], cpu_share: float, can_count: bool) -> Verdict:
    decision = overall(metrics, [])
    return Verdict(decision.verdict, decision.reasons, Path("base"), Path("cand"), metrics, seed=1, pairs=20,
                   planned_pairs=20, advice=advise([WALL], metrics, {"loop": cpu_share}, lambda: can_count))


def _terminal(verdict: Verdict) -> list[str]:
    out = io.StringIO()
    print_verdict(Console(file=out, width=80, color_system=None), verdict)
    return out.getvalue().splitlines()


def test_a_floor_wider_than_what_matters_says_so_once_in_every_form_naming_the_alternatives() -> None:
    verdict = _verdict(_judged(sd=0.15, floor=0.05), cpu_share=0.97, can_count=True)
    assert verdict.verdict == VerdictWord.INCONCLUSIVE
    (advice,) = verdict.advice
    assert advice.alternatives == (Alternative.CPU_MS, Alternative.INSTRUCTIONS)
    assert advice.threshold == pytest.approx(0.01) and advice.width > 0.05  # the MDE, wider than the floor
    line = advice.line()
    assert line.startswith(f"loop/wall_ms cannot decide changes of 1.00%: its floor or MDE is {advice.width:.2%}")
    assert "`cpu_ms`" in line and f"`{INSTRUCTIONS_LINE}`" in line

    said = [text for text in _terminal(verdict) if "advice" in text]
    assert said == [f"advice: {line}"]  # one line on an 80-column console, printed once
    assert f"advice: {line}" in verdict_facts(verdict, "s")
    assert markdown.render(overall(verdict.metrics, []), verdict_facts(verdict, "s")).count(line) == 1
    document = json.loads(json.dumps(verdict.to_dict()))
    assert document["advice"][0]["alternatives"] == ["cpu_ms", INSTRUCTIONS_LINE]
    assert Verdict.from_dict(document) == verdict
    view = VerdictView.from_verdict(Verdict.from_dict(document))
    assert view is not None and view.advice == (line,)
    assert markdown_table(view)[-1] == f"\nadvice: {line}"  # the journal and the final report
    assert verdict_html(view).count("advice: loop/wall_ms cannot decide changes of 1.00%") == 1  # the dashboard


def test_a_floor_within_what_matters_says_nothing_and_the_document_is_unchanged() -> None:
    verdict = _verdict(_judged(sd=0.001, floor=0.003), cpu_share=0.97, can_count=True)
    assert verdict.verdict == VerdictWord.NO_CHANGE and verdict.advice == ()
    assert "advice" not in verdict.to_dict()  # older verdicts read back byte-identical
    assert not [text for text in _terminal(verdict) if "advice" in text]
    view = VerdictView.from_verdict(verdict)
    assert view is not None and "advice" not in "".join(markdown_table(view)) + verdict_html(view)


@pytest.mark.parametrize(("cpu_share", "can_count", "judged", "expected"), [
    (0.3, True, (), (Alternative.INSTRUCTIONS,)),  # mostly waiting: cpu_ms would not stand in for wall time
    (0.97, False, (), (Alternative.CPU_MS,)),  # no valgrind or perf to count with
    (0.97, True, ("cpu_ms", "instructions"), ()),  # both judged already
    (0.3, False, (), ()),
])
def test_the_advice_names_only_the_alternatives_that_apply(cpu_share: float, can_count: bool,
                                                           judged: tuple[str, ...],
                                                           expected: tuple[Alternative, ...]) -> None:
    specs = [WALL, *(MetricSpec("loop", name, Direction.LOWER) for name in judged)]
    (advice,) = advise(specs, _judged(sd=0.15, floor=0.05), {"loop": cpu_share}, lambda: can_count)
    assert advice.alternatives == expected
    if not expected:
        assert "neither `cpu_ms`" in advice.line() and "more pairs or a quieter machine" in advice.line()


def _observation(role: str, wall_ms: float, cpu_ms: float) -> Observation:
    return Observation("loop", role, {"wall_ms": wall_ms, "cpu_ms": cpu_ms}, None, None, True, "", {})


def test_a_cpu_bound_scenario_is_told_by_its_least_contended_run_even_when_only_wall_time_is_judged(
        tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text('[suite]\n\n[[scenario]]\nname = "loop"\ncommand = ["{bin}"]\n\n[[metric]]\nname = "wall_ms"\n')
    loaded = load_suite(suite)
    extra = timing_specs(loaded)
    assert [spec.key for spec in extra] == ["loop/cpu_ms"]  # recorded for the advice, never judged
    series = RunSeries([*loaded.metrics, *extra])
    for wall, cpu in ((120.0, 40.0), (60.0, 39.0), (150.0, 41.0)):  # a busy machine stretches most runs
        series.add(_observation("baseline", wall, cpu), _observation("candidate", wall, 5.0))
    assert cpu_share(loaded, series) == {"loop": pytest.approx(0.65)}
