"""The verdict's serialized forms (the `--json` document lab.db stores, the CSV and Markdown exports) stay
byte for byte what they were when its vocabularies were strings: the files in tests/data/verdict-formats were
written by the code before they became enums, from the same suite and samples as here, and written again when
each side's spread (mean ± σ, min … max) and the ratio joined them; a document stored before that
(`paired-before-spreads.json`) still reads back unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchard.bench.deciding.decide import decide_metrics, decide_unpaired, overall
from orchard.bench.deciding.verdict import Method, MetricNoise, MetricResult, Scale, Verdict
from orchard.bench.exports import csv, markdown
from orchard.bench.exports import json as json_export
from orchard.bench.suites.suite_reader import load_suite

GOLDEN = Path(__file__).parent / "data" / "verdict-formats"
SUITE = """
[suite]
name = "formats"

[[scenario]]
name = "s"
command = ["true"]

[[metric]]
name = "wall_ms"

[[metric]]
name = "cpu_ms"
direction = "higher"

[[metric]]
name = "stdout_bytes"
"""
BASE = [10.0, 10.4, 9.8, 10.1, 10.3, 9.9, 10.2, 10.0]
SAMPLES = {
    "s/wall_ms": (BASE, [v * 0.7 for v in BASE]),  # log-ratio, improved
    "s/cpu_ms": ([v - 10.0 for v in BASE], [v - 10.05 for v in BASE]),  # relative: values not all positive
    "s/stdout_bytes": ([400.0] * 8, [40.0] * 8),  # exact
}


def rendered(tmp_path: Path) -> dict[str, str]:
    """Every form, from paired and unpaired decisions over the same samples."""
    (tmp_path / "suite.toml").write_text(SUITE, encoding="utf-8")
    specs = load_suite(tmp_path / "suite.toml").metrics
    noise = {spec.key: MetricNoise(0.02, spec.metric == "stdout_bytes", 0.01) for spec in specs}
    forms = {}
    # 0.10 both directions together: one-sided 5% per claim, the level these files were written at
    for name, metrics in (("paired", decide_metrics(specs, SAMPLES, noise, 0.10)),
                          ("unpaired", decide_unpaired(specs, SAMPLES, 0.10))):
        decision = overall(metrics, [])
        document = Verdict(decision.verdict, decision.reasons, Path("/b"), Path("/c"), decision.metrics,
                           suite="formats", seed=7, pairs=8, planned_pairs=8).to_dict()
        forms[f"{name}.json"] = json_export.render(document)
        forms[f"{name}.csv"] = csv.render(decision)
        forms[f"{name}.md"] = markdown.render(decision, ["a fact"])
    return forms


@pytest.mark.parametrize("name", ["paired.json", "paired.csv", "paired.md", "unpaired.json", "unpaired.csv",
                                  "unpaired.md"])
def test_verdict_forms_are_byte_identical(tmp_path: Path, name: str) -> None:
    assert rendered(tmp_path)[name] == (GOLDEN / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["paired.json", "unpaired.json", "paired-before-spreads.json"])
def test_a_stored_verdict_reads_back_to_the_same_document(name: str) -> None:
    text = (GOLDEN / name).read_text(encoding="utf-8")
    assert json_export.render(Verdict.from_dict(json.loads(text)).to_dict()) == text


def test_a_verdict_script_that_names_no_method_or_scale_is_stored_as_before() -> None:
    said = {"scenario": "s", "metric": "m", "direction": "lower", "verdict": "improved"}
    metric = MetricResult.from_dict(said)
    assert (metric.method, metric.scale) == (Method.UNSTATED, Scale.UNSTATED)
    assert (metric.to_json()["method"], metric.to_json()["scale"]) == ("", "")


def test_unpaired_alpha_counts_both_directions_together(tmp_path: Path) -> None:
    # `orchard compare`'s unpaired path spends alpha as the paired verdict does: a claim either way at half of
    # it, so alpha 0.05 on one varying metric is a 95% interval (it was a 90% one: 10% false claims)
    (tmp_path / "suite.toml").write_text(SUITE, encoding="utf-8")
    wall = [spec for spec in load_suite(tmp_path / "suite.toml").metrics if spec.metric == "wall_ms"]
    [result] = decide_unpaired(wall, {"s/wall_ms": SAMPLES["s/wall_ms"]}, 0.05)
    assert result.confidence is not None and result.confidence >= 0.95


def test_every_export_carries_each_sides_spread_and_the_ratio(tmp_path: Path) -> None:
    """One result type for every form: what the terminal shows beside the median, each file holds too."""
    forms = rendered(tmp_path)
    [wall] = [m for m in json.loads(forms["paired.json"])["metrics"] if m["key"] == "s/wall_ms"]
    assert wall["baseline_spread"] == {"mean": pytest.approx(10.0875), "sd": pytest.approx(0.2031, abs=1e-4),
                                       "min": 9.8, "max": 10.4}
    assert wall["candidate_spread"]["min"] == pytest.approx(6.86)
    rows = {row.split(",")[0]: row.split(",") for row in forms["paired.csv"].splitlines()}
    cells = dict(zip(rows["metric"], rows["s/wall_ms"], strict=True))
    assert (cells["ratio"], cells["baseline_mean"], cells["baseline_min"], cells["candidate_max"]) == (
        "0.7", "10.0875", "9.8", "7.28")
    assert [rows[key][rows["metric"].index("unit")] for key in ("s/wall_ms", "s/stdout_bytes")] == ["ms", "B"]
    assert "-30.00% (1.43x faster)" in forms["paired.md"]
    assert "10.1 ms (10.1 ms ± 203 µs; 9.80 ms … 10.4 ms)" in forms["paired.md"]
