"""Held-out inputs and the plausible bound: what a suite holds back from workers, and how verdicts label it."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest

from orchard.bench.held_out.holdout import withhold, worker_view
from orchard.bench.suites.suite import DEFAULT_PLAUSIBLE
from orchard.bench.suites.suite_reader import load_suite
from orchard.errors import UsageError
from tests.helpers import orchard

SUITE = '''
# a comment about the whole suite
[suite]
name = "held"
runs = 6
min_runs = 6
calibration_runs = 6
holdout = ["fixtures/hidden/"]
{extra}

[[fixture]]
name = "secret"
command = ["cp", "{{suite_dir}}/fixtures/hidden/input.txt", "{{dir}}/input.txt"]
holdout = true

# the one a worker sees
[[scenario]]
name = "visible"
command = ["{{bin}}", "{{suite_dir}}/fixtures/visible.txt"]
expect = ["alpha"]

# the judge's own: workers never see it
[[scenario]]
name = "unseen"
command = ["{{bin}}", "{{fixture.secret}}/input.txt"]
expect = ["omega"]
holdout = true

[[metric]]
name = "stdout_bytes"

[[metric]]
name = "wall_ms"
scenarios = ["unseen"]

[[gate]]
kind = "information_recall"
'''


def bench(tmp_path: Path, extra: str = "") -> Path:
    root = tmp_path / "bench"
    (root / "fixtures" / "hidden").mkdir(parents=True)
    (root / "fixtures" / "visible.txt").write_text("alpha " * 50 + "\n")
    (root / "fixtures" / "hidden" / "input.txt").write_text("omega " * 50 + "\n")
    (root / "suite.toml").write_text(SUITE.format(extra=extra))
    return root / "suite.toml"


def test_holdout_keys_are_read_and_the_plausible_bound_defaults_to_ten(tmp_path: Path) -> None:
    suite = load_suite(bench(tmp_path))
    assert suite.held_out == frozenset({"unseen"})
    assert [f.holdout for f in suite.fixtures] == [True]
    assert suite.holdout == ("fixtures/hidden/",)
    assert suite.plausible == DEFAULT_PLAUSIBLE == 10.0
    assert load_suite(bench(tmp_path / "b", "plausible = 4")).plausible == 4.0


@pytest.mark.parametrize(("extra", "message"), [
    ("plausible = 1", "'plausible' must be a factor above 1"),
    ("plausible = nan", "'plausible' must be a factor above 1"),
    ('holdout = ["../outside"]', "'holdout' lists paths relative to the suite's directory"),
])
def test_bad_holdout_keys_name_what_is_wrong(tmp_path: Path, extra: str, message: str) -> None:
    text = SUITE.format(extra=extra).replace('holdout = ["fixtures/hidden/"]\n', "") if "holdout" in extra \
        else SUITE.format(extra=extra)
    path = bench(tmp_path)
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        load_suite(path)
    result = orchard("verdict", "--suite", path, "--baseline", "/bin/cat", "--candidate", "/bin/cat")
    assert result.returncode == 2 and message in result.stderr


def test_a_visible_scenario_may_not_use_a_held_out_fixture_nor_may_all_be_held_out(tmp_path: Path) -> None:
    path = bench(tmp_path)
    text = path.read_text()
    path.write_text(text.replace('expect = ["omega"]\nholdout = true', 'expect = ["omega"]'))
    with pytest.raises(UsageError, match="'unseen' is visible to workers but uses held-out fixture"):
        load_suite(path)
    path.write_text(text.replace('expect = ["alpha"]', 'expect = ["alpha"]\nholdout = true'))
    with pytest.raises(UsageError, match="every scenario is held out"):
        load_suite(path)


def test_a_workers_copy_has_no_held_out_file_scenario_or_fixture_and_keeps_the_comments(tmp_path: Path) -> None:
    path = bench(tmp_path)
    changed = withhold(path)
    assert changed == ["fixtures/hidden/input.txt", "suite.toml"]
    assert not (path.parent / "fixtures" / "hidden" / "input.txt").exists()
    assert (path.parent / "fixtures" / "visible.txt").exists()
    view = load_suite(path)
    assert [s.name for s in view.scenarios] == ["visible"] and view.fixtures == ()
    assert [m.key for m in view.metrics] == ["visible/stdout_bytes"]  # wall_ms named only the held-out one
    text = path.read_text()
    assert "# a comment about the whole suite" in text and "# the one a worker sees" in text
    assert "omega" not in text and "secret" not in text and "the judge's own" not in text and "hidden" not in text
    assert withhold(path) == []  # the view of a view holds nothing back
    assert tomllib.loads(worker_view(path)) == tomllib.loads(text)


def test_a_bench_without_held_out_inputs_is_left_exactly_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "suite.toml"
    path.write_text('[[scenario]]\nname = "one"\ncommand = ["{bin}"]\n')
    assert withhold(path) == []
    assert path.read_text() == '[[scenario]]\nname = "one"\ncommand = ["{bin}"]\n'


def test_the_verdict_runs_held_out_scenarios_and_labels_their_metrics(tmp_path: Path) -> None:
    path = bench(tmp_path)
    terse = tmp_path / "terse"
    terse.write_text('#!/bin/sh\ntr -s " " < "$1" | head -c 20\n')
    terse.chmod(0o755)
    env = {"ORCHARD_CACHE_DIR": str(tmp_path / "cache"), "ORCHARD_LOCK_FILE": str(tmp_path / "lock")}
    result = orchard("verdict", "--suite", path, "--baseline", "/bin/cat", "--candidate", terse, "--json",
                     "--results", tmp_path / "results", env={**os.environ, **env})
    assert result.returncode in (0, 1), result.stderr
    metrics = {m["key"]: m for m in json.loads(result.stdout)["metrics"]}
    assert metrics["unseen/stdout_bytes"]["note"].startswith("held-out")
    assert metrics["unseen/stdout_bytes"]["verdict"] == "improved"
    assert not metrics["visible/stdout_bytes"]["note"].startswith("held-out")
