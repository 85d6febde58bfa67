"""Validation with real bounds, and worker text that cannot become Markdown (issue 9).

Numbers are finite and inside their documented ranges (docs/hypotheses.md:
impact and effort 1 to 5, confidence above 0 and at most 1; orchard.toml's
help text: workers 1 to 256, timeouts, counts, sizes): each bad value is
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
from tests.lab.lab_helpers import assert_revisits_killed, tried_by_hypothesis
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
    ("count", "100000000", "workers.count: 100000000 is above the maximum 256 (1 to 256)"),
    ("judges", "257", "workers.judges: 257 is above the maximum 256 (1 to 256)"),
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
    assert_revisits_killed(tried_by_hypothesis(root), ["breaks-build"])  # after the good win on src/alpha.txt
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
    from orchard.lab.workers.launchers.launchers import launcher_for

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


# -- the last bad inputs (issue 20, item 6): each exit 2, one line naming it, nothing written ----------------------


def _one_line(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _database(root: Path) -> str:
    """Every row of lab.db, every table (the backlog, the journal, meta, pins, builds, measurements)."""
    import sqlite3

    db = sqlite3.connect(f"{(root / 'lab.db').resolve().as_uri()}?mode=ro", uri=True)
    try:
        return "\n".join(db.iterdump())
    finally:
        db.close()


@pytest.mark.parametrize(("table", "needles"), [
    ("[target]\nbinary = \"/etc/passwd\"\n", ("target.binary: '/etc/passwd' is outside the target checkout",)),
    ("[target]\nbinary = \"../../etc/passwd\"\n", ("target.binary: '../../etc/passwd' is outside",)),
    ("[lab]\nauthor_email = \"lab@x.invalid\\nSigned-off-by: someone\"\n",
     ("lab.author_email:", "holds a line break or control character")),
    ("x = " + "[" * 5000 + "\n", ("invalid TOML: arrays or tables nested too deeply",)),
])
def test_orchard_init_refuses_a_config_outside_its_bounds(
    tmp_path: Path, target_repo_module: Path, table: str, needles: tuple[str, ...]
) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(table)
    result = _orchard("init", tmp_path / "ws", "--target", target_repo_module, "--config", config)
    _one_line(result, str(config), *needles)
    assert not (tmp_path / "ws").exists(), "no workspace was made"


@pytest.mark.parametrize(("patch", "needle"), [
    ("absent.patch", "[[hypothesis]] #1.patch: 'absent.patch' is not a file"),
    ("../outside.patch", "[[hypothesis]] #1.patch: '../outside.patch' is outside the hypotheses file's directory"),
])
def test_a_hypothesis_patch_missing_or_outside_its_files_directory_is_refused(
    lab: Path, tmp_path: Path, patch: str, needle: str
) -> None:
    (tmp_path / "outside.patch").write_text("--- a/x\n+++ b/x\n")
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "hypotheses.toml").write_text(
        f'[[hypothesis]]\nid = "p"\nmetric = "out/stdout_bytes"\nchange = "x"\npatch = "{patch}"\n')
    before = _database(lab)
    _one_line(_orchard("backlog", "add", lab, "--file", tmp_path / "h" / "hypotheses.toml"), needle)
    assert _database(lab) == before


def test_a_scope_outside_the_target_is_refused(lab: Path) -> None:
    before = _database(lab)
    result = _orchard("backlog", "add", lab, "--metric", "out/stdout_bytes", "--change", "x", "--scope", "../../x")
    _one_line(result, "flags.scope: '../../x' is outside the target checkout")
    assert _database(lab) == before


def test_a_lab_db_that_is_a_directory_is_refused(lab: Path) -> None:
    kept = lab.parent / "lab.db.kept"  # the module's lab, its database put back afterwards
    (lab / "lab.db").rename(kept)
    (lab / "lab.db").mkdir()
    try:
        for command in ("run",), ("status",), ("backlog", "list"):
            _one_line(_orchard(*command, lab), f"{lab / 'lab.db'}: not a lab database (not a regular file)")
    finally:
        (lab / "lab.db").rmdir()
        kept.rename(lab / "lab.db")


def test_a_refused_run_records_nothing_not_even_its_pins_or_baseline(lab: Path) -> None:
    """A bad suite.toml is refused before the lab records its main, builds its base or measures anything."""
    suite = lab / "bench" / "suite.toml"
    original = suite.read_text()
    before = _database(lab)
    suite.write_text(original + '\n[[metric]]\nname = "stdout_bytes"\nfloor = nan\n')
    try:
        result = _orchard("run", lab)
    finally:
        suite.write_text(original)
    _one_line(result, "'floor' must be a finite number")
    assert _database(lab) == before
    assert not (lab / "judge" / "start-logs").exists(), "the harness tests did not run"


OSC52 = "\x1b]52;c;cm0gLXJmIH4K\x07"  # a terminal that obeys it puts `rm -rf ~` on the user's clipboard


def test_backlog_add_and_list_show_terminal_escapes_from_hypothesis_text_escaped(lab: Path, tmp_path: Path) -> None:
    path = tmp_path / "escapes.toml"
    path.write_text('[[hypothesis]]\nid = "osc"\nmetric = "out/stdout_bytes"\nchange = "x"\n'
                    'title = "fine\\u001b]52;c;cm0gLXJmIH4K\\u0007 title\\u001b[2K"\n')
    added = _orchard("backlog", "add", lab, "--file", path)
    listed = _orchard("backlog", "list", lab)
    for result in (added, listed):
        assert result.returncode == 0, result.stderr
        assert "\x1b" not in result.stdout and "\x07" not in result.stdout, repr(result.stdout)
        assert "fine\\x1b]52;c;cm0gLXJmIH4K\\x07 title\\x1b[2K" in result.stdout, result.stdout
    assert OSC52 not in listed.stdout
