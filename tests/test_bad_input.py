"""Bad input: one clear message naming what is wrong, exit 2, nothing recorded lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import SUITE, make_binary, make_suite, orchard


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    make_binary(tmp_path, "fast")
    make_suite(tmp_path)
    (tmp_path / "not-executable").write_text("#!/bin/sh\n")
    return tmp_path


def assert_usage_error(result, *needles: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr  # one message, no traceback
    for needle in needles:
        assert needle in lines[0]


def run_verdict(lab: Path, *args: str):
    base = {"--suite": "suite.toml", "--baseline": "fast", "--candidate": "fast"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    return orchard("verdict", *[x for pair in base.items() for x in pair], cwd=lab)


def test_missing_binary(lab: Path) -> None:
    assert_usage_error(run_verdict(lab, "--candidate", "nope"), "candidate: binary", "nope", "does not exist")


def test_binary_not_executable(lab: Path) -> None:
    assert_usage_error(run_verdict(lab, "--baseline", "not-executable"), "not an executable", "not-executable")


def test_directory_as_binary(lab: Path) -> None:
    assert_usage_error(run_verdict(lab, "--candidate", str(lab)), "not an executable")


def test_toml_error_names_file_and_line(lab: Path) -> None:
    (lab / "broken.toml").write_text('[suite]\nname = "x"\n\n[[scenario]]\nname = "a"\ncommand = [unclosed\n')
    result = run_verdict(lab, "--suite", "broken.toml")
    assert_usage_error(result, "broken.toml", "invalid TOML", "line 6")


def test_unknown_metric_in_gate(lab: Path) -> None:
    text = SUITE.format(runs=10, calibration_runs=10) + '\n[[gate]]\nkind = "no_drop"\nmetric = "recal"\n'
    make_suite(lab, text=text)
    assert_usage_error(run_verdict(lab), "unknown metric 'recal'", "suite.toml")


def test_runs_below_minimum(lab: Path) -> None:
    assert_usage_error(run_verdict(lab, "--runs", "3"), "--runs must be at least 6")


def test_missing_suite_file(lab: Path) -> None:
    assert_usage_error(run_verdict(lab, "--suite", "absent.toml"), "suite file not found")


@pytest.mark.parametrize(
    "mutation, needle",
    [
        ('[[scenario]]\nname = "x"\nkind = "teleport"\ncommand = ["a"]\n', "'kind' must be one of"),
        ('[[metric]]\nname = "wall_ms"\ndirection = "sideways"\n', "'direction' must be"),
        ('[[metric]]\nname = "speed"\n', "unknown metric for command scenario"),
        ('[[gate]]\nkind = "information_recall"\nscenarios = ["ghost"]\n', "unknown scenario 'ghost'"),
        ('[[fixture]]\nname = "data"\ncommand = ["true"]\ncolour = 1\n', "[[fixture]] 'data': unknown key `colour`"),
        ('[other]\nruns = 3\n', "top level: unknown key `other`"),
    ],
)
def test_suite_mistakes_are_named(lab: Path, mutation: str, needle: str) -> None:
    make_suite(lab, text=SUITE.format(runs=10, calibration_runs=10) + "\n" + mutation)
    assert_usage_error(run_verdict(lab), needle)


@pytest.mark.slow
def test_nothing_recorded_is_lost(lab: Path) -> None:
    results = lab / "results" / "verdict"
    results.mkdir(parents=True)
    earlier = results / "20200101T000000000000Z.jsonl"
    earlier.write_text('{"verdict": "PASS"}\n')
    assert_usage_error(run_verdict(lab, "--runs", "2"), "--runs")
    assert earlier.read_text() == '{"verdict": "PASS"}\n'
    ok = orchard(
        "verdict", "--suite", "suite.toml", "--baseline", "fast", "--candidate", "fast", "--runs", "8", cwd=lab
    )
    assert ok.returncode == 0, ok.stderr
    assert earlier.read_text() == '{"verdict": "PASS"}\n'
    assert len(list(results.glob("*.jsonl"))) == 2


def test_bench_run_subject_syntax(lab: Path) -> None:
    result = orchard("bench", "run", "--suite", "suite.toml", "--subject", "fast", cwd=lab)
    assert_usage_error(result, "NAME=BIN")


@pytest.mark.parametrize(("floor", "shown"), [("nan", "nan"), ("inf", "inf"), ("-inf", "-inf")])
def test_a_floor_that_is_not_a_finite_number_is_refused(lab: Path, floor: str, shown: str) -> None:
    """A nan floor compared false with every effect: two identical binaries came out PASS "improved"."""
    make_suite(lab, text=SUITE.format(runs=10, calibration_runs=10).replace("floor = 0.02", f"floor = {floor}"))
    result = run_verdict(lab)
    assert_usage_error(result, "[[metric]] 'wall_ms'", f"'floor' must be a finite number, not negative (got {shown})")
    assert not (lab / "results").exists(), "nothing measured, nothing written"


def test_a_holdout_entry_that_names_no_file_is_refused(lab: Path) -> None:
    """`holdout = ["loop"]` (a scenario's name, not a file) held nothing back, silently."""
    text = SUITE.format(runs=10, calibration_runs=10).replace("[suite]\n", '[suite]\nholdout = ["loop"]\n')
    make_suite(lab, text=text)
    assert_usage_error(run_verdict(lab), "'holdout' entry 'loop' names no file under", "holdout = true")


def test_a_calibration_file_nested_200000_deep_is_refused(lab: Path) -> None:
    (lab / "calibration.json").write_text("[" * 200_000)
    result = run_verdict(lab, "--calibration", "calibration.json")
    assert_usage_error(result, "calibration file calibration.json", "nested too deeply")


@pytest.mark.parametrize(("table", "entry", "shown"), [
    ("[[metric]]", "floor = 1e308", "[[metric]] 'wall_ms': 'floor' must be at most 10 (1000% of the baseline; got "
                                    "1e+308)"),
    ("[suite]", f"runs = {2**63 - 1}", f"[suite]: 'runs' must be at most 10,000 pairs (got {2**63 - 1})"),
    ("[suite]", f"extra_runs = {2**63 - 1}", f"'extra_runs' must be at most 10,000 pairs (got {2**63 - 1})"),
    ("[suite]", "calibration_runs = 100001", "'calibration_runs' must be at most 10,000 pairs (got 100001)"),
])
def test_a_suite_number_past_its_bound_is_refused(lab: Path, table: str, entry: str, shown: str) -> None:
    """Accepted on main: a floor of 1e308 made every change NO-CHANGE; 2**63-1 runs planned a campaign forever."""
    text = SUITE.format(runs=10, calibration_runs=10)
    key = entry.split(" = ")[0]
    if table == "[[metric]]":
        text = text.replace("floor = 0.02", entry, 1)
    else:
        text = "\n".join(line for line in text.splitlines() if not line.startswith(f"{key} ="))
        text = text.replace("[suite]\n", f"[suite]\n{entry}\n", 1)
    make_suite(lab, text=text)
    assert_usage_error(run_verdict(lab), shown)
    assert not (lab / "results").exists(), "nothing measured, nothing written"


@pytest.mark.parametrize(("command", "args", "shown"), [
    ("verdict", ("--runs", str(10**20)), f"--runs must be at most 10,000 (got {10**20})"),
    ("verdict", ("--seed", "-1"), "--seed must be from 0 to 9223372036854775807 (got -1)"),
    ("calibrate", ("--runs", str(10**20)), f"--runs must be at most 10,000 for a calibration (got {10**20})"),
])
def test_a_command_line_number_past_its_bound_is_refused(lab: Path, command: str, args: tuple[str, ...],
                                                         shown: str) -> None:
    """Accepted on main: `--runs 10**20` died in statistics (a traceback); `--seed -1` ran the order of seed 1."""
    subjects = ("--baseline", "fast", "--candidate", "fast") if command == "verdict" else ("--baseline", "fast")
    result = orchard(command, "--suite", "suite.toml", *subjects, *args, cwd=lab)
    assert_usage_error(result, shown)
    assert not (lab / "results").exists(), "nothing measured, nothing written"


@pytest.fixture
def target_repo(tmp_path: Path) -> Path:
    from tests.lab.lab_helpers import TARGET_FILES, make_repo

    return make_repo(tmp_path / "target-repo", TARGET_FILES)


def test_init_refuses_an_empty_orchard_toml_and_makes_nothing(tmp_path: Path, target_repo: Path) -> None:
    """Accepted on main: an empty --config file (a truncated copy, a wrong path's placeholder) made a lab."""
    (tmp_path / "empty.toml").write_text("# nothing but a comment\n")
    result = orchard("init", tmp_path / "ws", "--target", target_repo, "--config", tmp_path / "empty.toml")
    assert_usage_error(result, "empty.toml: holds no settings (an empty orchard.toml); nothing was created")
    assert not (tmp_path / "ws").exists()


def test_a_failed_init_leaves_no_directory_it_made_behind(tmp_path: Path) -> None:
    """On main the workspace was removed but the parents `init` made for it (`a/b` of `a/b/ws`) stayed."""
    result = orchard("init", tmp_path / "a" / "b" / "ws", "--target", tmp_path / "no-such-repo")
    assert_usage_error(result, "target.repo", "cannot clone it")
    assert not (tmp_path / "a").exists()
