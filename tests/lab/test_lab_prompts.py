"""Prompts carry everything a worker needs; reports are read as found, never invented."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from orchard.errors import UsageError
from orchard.lab.records.candidate import REPORT_FLAGS
from orchard.lab.records.experiment import Experiment
from orchard.lab.records.hypothesis import Hypothesis, in_scope, outside_scope
from orchard.lab.workers.workspace import report
from orchard.lab.workers.workspace.prompts import render_prompt
from orchard.lab.workers.workspace.workspace import Workspace
from tests.lab.lab_helpers import git

CONFIG = """
[target]
build = "cargo build --release"
test = "cargo test"
binary = "target/release/oak"
[bench]
measure = "python3 scripts/devloop.py --skip-build --oak-local-bin {binary}"
"""


def test_prompt_has_hypothesis_scope_absolute_paths_commands_rules_and_guidance(
    make_workspace: Callable[..., Workspace], bench_repo: Path
) -> None:
    (bench_repo / "prompts").mkdir()
    (bench_repo / "prompts/benchmark-changeset.md").write_text("Measure twice, cut once.\n")
    git(bench_repo, "add", "-A")
    git(bench_repo, "commit", "-qm", "guidance")
    workspace = make_workspace(CONFIG)
    checkout = workspace.setup_worker("w7")
    hypothesis = Hypothesis(metric="tokens_total", current_value="1840", suspected_cause="status re-reads the index",
                            change="cache the index", predicted_effect=-0.10, scope=("src/index.rs", "src/cache/"))
    path = render_prompt(workspace, Experiment("cache-index", hypothesis, checkout))
    assert path == workspace.root / "prompts/cache-index.md"
    text = path.read_text()
    worker = workspace.root / "worker-w7"
    for expected in (
        "# Experiment: cache-index",
        "- Metric: tokens_total", "- Current value: 1840", "- Suspected cause: status re-reads the index",
        "- Change to try: cache the index", "- Predicted effect: -10%",
        "- `src/index.rs`\n- `src/cache/`",
        f"`{worker}/target`", f"`{worker}/bench`", f"`{worker}/target/target/release/oak`",
        f"`{worker}/target/.orchard-report.json`",
        "`cargo build --release`", "`cargo test`",
        f"`python3 scripts/devloop.py --skip-build --oak-local-bin {worker}/target/target/release/oak`",
        "Do not commit", "benchmark copy", "noise floor",
        "Measure twice, cut once.",
        '"schema": "orchard.worker-report/1"', '"experiment": "cache-index"',
    ):
        assert expected in text, expected
    assert "$" not in text.replace("$(", "")  # every template field was filled


def test_prompt_says_when_a_step_is_not_configured(make_workspace: Callable[..., Workspace]) -> None:
    workspace = make_workspace()
    text = render_prompt(workspace, Experiment("e", Hypothesis(metric="m", change="c"),
                                               workspace.setup_worker("w"))).read_text()
    assert text.count("(none configured for this lab: skip this step)") == 3
    assert "any file in your checkout" in text and "benchmark's own guidance" not in text


def test_reports_missing_malformed_invalid_and_ok(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    assert report.read_report(path).state == "missing"
    path.write_text("{not json")
    reading = report.read_report(path)
    assert (reading.state, reading.raw, reading.report) == ("malformed", "{not json", None)
    bad = {"schema": report.SCHEMA, "experiment": "other", "status": "great", "summary": 3,
           "measurements": [{"metric": "m", "before": "10", "n": -1, "cleared_noise_floor": "yes"}],
           "build": {"exit_code": "0"}}
    path.write_text(json.dumps(bad))
    reading = report.read_report(path, "mine")
    assert reading.state == "invalid" and reading.report is None
    assert reading.problems == [
        "experiment: 'other' is not this experiment ('mine')",
        "status: expected one of done, failed, gave-up, got 'great'",
        "summary: expected a string",
        "measurements[0].before: expected a number or null",
        "measurements[0].n: expected a non-negative integer or null",
        "measurements[0].cleared_noise_floor: expected true, false or null",
        "build.command: expected a string",
        "build.exit_code: expected an integer or null",
    ]
    good = dict(report.EXAMPLE, experiment="mine", extra={"kept": True})
    path.write_text(json.dumps(good))
    reading = report.read_report(path, "mine")
    assert reading.state == "ok" and reading.report == good
    with pytest.raises(ValueError, match="invalid report"):
        report.write_report(tmp_path / "x.json", {"schema": report.SCHEMA})


def test_scope_paths_directories_and_patterns() -> None:
    scope = ["src/index.rs", "src/cache/", "benches/*.rs", "docs"]
    assert in_scope("src/index.rs", scope) and in_scope("src/cache/lru/mod.rs", scope)
    assert in_scope("benches/a/b.rs", scope) and in_scope("docs/x.md", scope)
    assert outside_scope(["src/index.rs", "src/main.rs", "src/cache.rs", "docsy"], scope) == [
        "src/main.rs", "src/cache.rs", "docsy"]
    assert outside_scope(["anything"], []) == []


def test_hypothesis_from_dict_names_every_bad_field() -> None:
    good = Hypothesis.from_dict({"metric": "m", "change": "c", "scope": ["a"], "current_value": 12,
                                 "impact": 3, "confidence": 0.5, "effort": 2})
    assert good.scope == ("a",) and good.current_value == "12" and good.score == pytest.approx(0.75)
    with pytest.raises(UsageError) as raised:
        Hypothesis.from_dict({"metric": "", "scope": "src", "effort": 0, "lane": "wild", "colour": 1})
    message = str(raised.value)
    for expected in ("colour: unknown field", "metric: missing", "change: missing", "scope: expected a list",
                     "effort: expected a number from 1 to 5, got 0", "lane: 'wild' is not one of exploit, explore"):
        assert expected in message


def test_every_report_but_ok_is_flagged_with_the_flag_lab_db_has_always_stored() -> None:
    assert set(REPORT_FLAGS) == set(report.ReportState) - {report.ReportState.OK}
    assert all(flag == f"report-{state}" for state, flag in REPORT_FLAGS.items())
