"""Validation with real bounds, and worker text that cannot become Markdown (issue 9).

Numbers are finite and inside their documented ranges (docs/hypotheses.md:
impact and effort 1 to 5, confidence above 0 and at most 1; orchard.toml's
help text: workers 1 to 64, timeouts, counts, sizes): each bad value is
refused with exit 2 and a message naming the key and the allowed range, and
lab.db is exactly as it was. Titles and worker output that reach backlog.md,
JOURNAL.md, LEADERBOARD.md and FINAL_REPORT.md never start a heading there.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import tomli_w
from click.testing import CliRunner

from orchard.cli import cli
from tests.lab.loop_support import snapshot
from tests.lab.test_bad_output import _lab, _outcomes

MEMORY_LIMIT = 2 << 30  # an orchard that tries to build 10**8 of anything fails here, not on the shared machine


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _orchard(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchard", *map(str, args)], capture_output=True, text=True,
                          timeout=900, check=False, preexec_fn=_limited)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, target_repo_module: Path) -> Path:
    return _lab(tmp_path_factory.mktemp("bounds"), target_repo_module, {})


@pytest.fixture(scope="module")
def target_repo_module(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.lab.lab_helpers import TARGET_FILES, make_repo

    return make_repo(tmp_path_factory.mktemp("repo") / "target-repo", TARGET_FILES)


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("timeout_minutes", "nan", "workers.timeout_minutes: nan is not a finite number (0.01 to 527040)"),
    ("timeout_minutes", "inf", "workers.timeout_minutes: inf is not a finite number (0.01 to 527040)"),
    ("timeout_minutes", "0", "workers.timeout_minutes: 0.0 is below the minimum 0.01 (0.01 to 527040)"),
    ("count", "100000000", "workers.count: 100000000 is above the maximum 64 (1 to 64)"),
    ("judges", "65", "workers.judges: 65 is above the maximum 64 (1 to 64)"),
])
def test_orchard_toml_numbers_out_of_range_are_refused_before_anything_runs(
    lab: Path, key: str, value: str, expected: str
) -> None:
    config = lab / "orchard.toml"
    original = config.read_text()
    data = tomllib.loads(original)
    data["workers"][key] = float(value) if key == "timeout_minutes" else int(value)
    if key == "count":
        data["workers"]["exploit"] = int(value)
    changed = tomli_w.dumps(data)
    before = snapshot(lab)
    config.write_text(changed)
    try:
        result = _orchard("run", lab)
    finally:
        config.write_text(original)
    assert result.returncode == 2, result.stdout + result.stderr
    assert expected in result.stderr and "Traceback" not in result.stderr
    assert snapshot(lab) == before
    assert _outcomes(lab) == {}, "no experiment started"


def invoke(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.output


FLAGS = ("--metric", "out/stdout_bytes", "--change", "shorter beta", "--scope", "src/beta.txt")


@pytest.mark.parametrize(("flags", "expected"), [
    (("--impact", "nan"), "flags.impact: expected a number from 1 to 5, got nan"),
    (("--impact", "99"), "flags.impact: expected a number from 1 to 5, got 99.0"),
    (("--impact", "-inf"), "flags.impact: expected a number from 1 to 5, got -inf"),
    (("--confidence", "7"), "flags.confidence: expected a number above 0 and at most 1, got 7.0"),
    (("--confidence", "nan"), "flags.confidence: expected a number above 0 and at most 1, got nan"),
    (("--effort", "0.5"), "flags.effort: expected a number from 1 to 5, got 0.5"),
    (("--predicted", "nan"), "flags.predicted_effect: expected a finite relative number of at least -1"),
    (("--predicted", "-3"), "flags.predicted_effect: expected a finite relative number of at least -1"),
    (("--title", "t" * 5000), "flags.title: 5000 characters, at most 200 allowed"),
])
def test_backlog_add_refuses_numbers_and_text_out_of_range(
    lab: Path, flags: tuple[str, ...], expected: str
) -> None:
    before = snapshot(lab)
    code, output = invoke("backlog", "add", lab, *FLAGS, *flags)
    assert code == 2, output
    assert expected in output and len(output.strip().splitlines()) == 1, output
    assert snapshot(lab) == before


def test_a_hypothesis_file_with_confidence_7_is_refused_whole(lab: Path, tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[[hypothesis]]\nid = "fine"\nmetric = "out/stdout_bytes"\nchange = "x"\n\n'
                    '[[hypothesis]]\nid = "sure"\nmetric = "out/stdout_bytes"\nchange = "y"\nconfidence = 7\n'
                    "impact = inf\n")
    before = snapshot(lab)
    code, output = invoke("backlog", "add", lab, "--file", path)
    assert code == 2, output
    assert "[[hypothesis]] #2.confidence: expected a number above 0 and at most 1, got 7" in output
    assert "[[hypothesis]] #2.impact: expected a number from 1 to 5, got inf" in output
    assert snapshot(lab) == before, "the good one is not added either"


INJECTED = "Fine title\n# INJECTED heading\n| a | b |"


@pytest.mark.slow
def test_titles_and_worker_output_never_become_markdown_headings(tmp_path: Path, target_repo: Path) -> None:
    # the worker's change breaks the build, whose last line of output is a would-be heading
    root = _lab(tmp_path, target_repo, {"breaks-build": "printf '#!/bin/sh\\n' > {target_dir}/src/alpha.txt; "
                                                        "printf '\\n# INJECTED by the build\\n' > "
                                                        "{target_dir}/src/beta.txt"})
    config = root / "orchard.toml"
    config.write_text(config.read_text().replace('build = "chmod +x src/alpha.txt"',
                                                 'build = "chmod +x src/alpha.txt; cat src/beta.txt >&2; '
                                                 'grep -q alpha src/alpha.txt"'))
    code, output = invoke("backlog", "add", root, "--id", "injected", "--title", INJECTED, "--metric",
                          "out/stdout_bytes", "--change", "nothing\n# INJECTED change", "--impact", "1",
                          "--scope", "README")
    assert code == 0, output
    result = _orchard("run", root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "INJECTED by the build" in _outcomes(root)["breaks-build"][2], "the worker's text is in the reasons"
    for name in ("backlog.md", "JOURNAL.md", "LEADERBOARD.md", "FINAL_REPORT.md"):
        lines = (root / name).read_text().splitlines()
        headings = [line for line in lines if line.lstrip().startswith("#") and "INJECTED" in line]
        assert headings == [], (name, headings)
        items = [line for line in lines if "INJECTED" in line and line.lstrip().startswith(("- #", "|"))]
        assert all("\\#" in line or "\\|" in line for line in items), (name, items)
    assert "Fine title # INJECTED heading \\| a \\| b \\|" in (root / "backlog.md").read_text()


def test_an_agent_reporting_text_or_nan_as_its_cost_records_it_as_not_reported() -> None:
    """The cost and tokens an agent prints land in lab.db and every budget check sums them."""
    from orchard.lab.config.orchard_toml import Config
    from orchard.lab.records.agent_usage import AgentUsage
    from orchard.lab.workers.launchers import launcher_for

    claude = launcher_for(Config())
    usage = claude.usage('{"type": "result", "total_cost_usd": "lots", "num_turns": NaN, '
                         '"usage": {"input_tokens": 1e999, "output_tokens": [1], "cache_read_input_tokens": 7}}\n')
    assert usage.cost_usd is None and usage.turns is None and usage.input_tokens is None
    assert usage.output_tokens is None and usage.cache_read_tokens == 7
    assert AgentUsage.from_dict(usage.to_dict()) == usage


def test_a_lab_recorded_before_the_bounds_still_opens(tmp_path: Path) -> None:
    """Bounds refuse new input; what lab.db already holds (impact 9 from an older orchard) still loads."""
    from orchard.lab.db.state import LabState
    from orchard.lab.records.hypothesis import Hypothesis

    state = LabState(tmp_path / "lab.db")
    try:
        state.add_hypothesis(Hypothesis(metric="m", change="c", id="old", impact=9, confidence=1.5), source="user")
        assert state.hypothesis("old").hypothesis.score == pytest.approx(13.5)
    finally:
        state.close()
