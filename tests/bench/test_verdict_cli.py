"""`orchard verdict` and `orchard calibrate` on real commands."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from orchard.bench.campaigns.campaign import run_verdict
from orchard.bench.suites.suite_reader import load_suite
from orchard.jsonlines import read_jsonl
from tests.helpers import SUITE, make_binary, make_suite, orchard


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    make_binary(tmp_path, "fast")
    make_binary(tmp_path, "fast-copy")
    make_binary(tmp_path, "slow", iterations=15000 * 2)  # twice the work: clear of any noise floor
    make_binary(tmp_path, "lossy", iterations=5000, output='echo "count 15000"')
    # varies run to run (not its PID: a confined run is PID 1 of its own namespace every time)
    make_binary(tmp_path, "flaky", output='echo "count 15000"; echo "fact: alpha"; od -An -N4 -tu4 /dev/urandom')
    make_binary(tmp_path, "broken", code=3)
    # 10 pairs: enough for what these tests assert (gates, rows, files, twice the work)
    make_suite(tmp_path, runs=10, calibration_runs=10)
    return tmp_path


def verdict(lab: Path, candidate: str, baseline: str = "fast", *extra: str) -> tuple[int, dict]:
    result = orchard("verdict", "--suite", "suite.toml", "--baseline", baseline, "--candidate", candidate,
                     "--json", *extra, cwd=lab)
    assert result.returncode in (0, 1), result.stderr
    return result.returncode, json.loads(result.stdout)


def test_same_binary_twice_is_not_regressed(lab: Path) -> None:
    # floors of +100%, so that no load beside the test decides it: at 2% an A/A comparison is claimed REGRESSED
    # now and then on a loaded machine (the verdict's false-claim rate, which test_verdict_simulation bounds), and a
    # fast tier met it once; no noise doubles one program's time in most of its pairs
    make_suite(lab, text=SUITE.format(runs=10, calibration_runs=10).replace("floor = 0.02", "floor = 1.0"))
    code, report = verdict(lab, "fast-copy")
    assert code == 0
    assert report["verdict"] in ("NO-CHANGE", "INCONCLUSIVE")
    wall = next(m for m in report["metrics"] if m["metric"] == "wall_ms")
    assert wall["verdict"] != "regressed"
    assert wall["floor"] > 0 and wall["n"] >= 8
    tokens = next(m for m in report["metrics"] if m["metric"] == "stdout_bytes")
    assert (tokens["method"], tokens["verdict"]) == ("exact", "no-change")


@pytest.mark.slow
def test_twice_the_work_is_regressed(lab: Path) -> None:
    # 30% more work once sat inside a loaded CI machine's floors: how small a shift the
    # verdict resolves is a measured number (benchmarks/verdict_power.py), not a test
    code, report = verdict(lab, "slow")
    assert code == 1
    assert report["verdict"] == "REGRESSED"
    # CPU time sees the extra work even when a loaded machine blurs wall time
    regressed = [m for m in report["metrics"] if m["verdict"] == "regressed"]
    assert {m["metric"] for m in regressed} <= {"wall_ms", "cpu_ms"} and regressed
    for metric in regressed:
        assert metric["interval"][0] > metric["floor"]
        assert metric["candidate_median"] > metric["baseline_median"]
    cpu = next(m for m in report["metrics"] if m["metric"] == "cpu_ms")
    assert 0.2 < cpu["effect"] < 1.5


@pytest.mark.slow
def test_faster_but_losing_information_is_regressed_by_the_gate(lab: Path) -> None:
    code, report = verdict(lab, "lossy")
    assert code == 1 and report["verdict"] == "REGRESSED"
    assert [g["name"] for g in report["gates"] if not g["passed"]] == ["information_recall"]


@pytest.mark.slow
def test_nondeterministic_output_fails_determinism_gate(lab: Path) -> None:
    code, report = verdict(lab, "flaky")
    assert code == 1 and report["verdict"] == "REGRESSED"
    assert any(g["name"] == "determinism" and not g["passed"] for g in report["gates"])


def test_failing_baseline_is_an_error_not_a_number(lab: Path) -> None:
    code, report = verdict(lab, "fast", "broken")
    assert code == 1
    assert report["verdict"] == "ERROR"
    assert report["metrics"] == []
    assert "scenario 'loop'" in report["reasons"][0] and "exit 3" in report["reasons"][0]


@pytest.mark.slow
def test_calibration_is_cached_and_reported_with_its_age(lab: Path) -> None:
    result = orchard("calibrate", "--suite", "suite.toml", "--baseline", "fast", "--runs", "10", cwd=lab)
    assert result.returncode == 0, result.stderr
    assert "loop/wall_ms" in result.stdout and "stochastic" in result.stdout
    assert "deterministic" in result.stdout  # stdout_bytes never varies
    text = orchard("verdict", "--suite", "suite.toml", "--baseline", "fast", "--candidate", "fast-copy", cwd=lab)
    assert "calibration: cached" in text.stdout and "old" in text.stdout
    assert "pair order seed:" in text.stdout


@pytest.mark.slow
def test_rows_record_pairs_in_randomized_order_with_warmup(lab: Path) -> None:
    _, report = verdict(lab, "fast-copy", "fast", "--seed", "42")
    assert report["seed"] == 42
    rows = read_jsonl(Path(lab / report["rows"]))
    measured = [r for r in rows if r.get("step_kind") == "measured"]
    assert {r["order"] for r in measured} == {"baseline-candidate", "candidate-baseline"}
    assert any(r["warmup"] for r in measured) and measured[0]["pair"] == 0
    for row in measured:
        for key in ("machine_fingerprint", "env_isolation_version", "fixture_id", "remote_transport"):
            assert key in row
        assert row["measurement_lock"] == "private"  # ORCHARD_LOCK_FILE is set for tests
    assert (lab / report["summary"]).read_text().startswith("# Measurement summary")


@pytest.mark.slow
def test_two_verdicts_at_once_never_overlap_their_measured_runs(lab: Path) -> None:
    import subprocess
    import sys

    orchard("calibrate", "--suite", "suite.toml", "--baseline", "fast", "--runs", "8", cwd=lab)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "orchard", "verdict", "--suite", "suite.toml", "--baseline", "fast",
             "--candidate", "fast-copy", "--json", "--results", f"results-{i}"],
            cwd=lab, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i in range(2)
    ]
    outputs = [p.communicate(timeout=600) for p in procs]
    intervals = []
    for out, _ in outputs:
        rows = read_jsonl(lab / json.loads(out)["rows"])
        # a pair holds the lock for both of its runs: its span is the unit that must not overlap
        spans: dict[int, list[int]] = {}
        for row in rows:
            if row.get("step_kind") == "measured":
                span = spans.setdefault(row["pair"], [row["monotonic_start_ns"], row["monotonic_end_ns"]])
                span[0] = min(span[0], row["monotonic_start_ns"])
                span[1] = max(span[1], row["monotonic_end_ns"])
        intervals.append(sorted(spans.values()))
    first, second = intervals
    assert first and second
    for a_start, a_end in first:
        for b_start, b_end in second:
            assert a_end <= b_start or b_end <= a_start, "measured runs of two verdicts overlapped"
    # they took turns: one of them waited for the other (long waits are also announced on stderr)
    waits = [row.get("lock_wait_ms") or 0.0 for out, _ in outputs for row in read_jsonl(lab / json.loads(out)["rows"])
             if row.get("step_kind") == "measured"]
    assert max(waits) > 0


def test_bench_run_measures_named_subjects(lab: Path) -> None:
    result = orchard("bench", "run", "--suite", "suite.toml", "--subject", "fast=fast", "--subject", "slow=slow",
                     "--runs", "3", cwd=lab)
    assert result.returncode == 0, result.stderr
    rows = [[cell.strip() for cell in line.split("│")][:4] for line in result.stdout.splitlines() if "│" in line]
    assert rows == [["loop", "fast", "3", "0"], ["loop", "slow", "3", "0"]], result.stdout


@pytest.mark.slow
def test_a_verdict_taken_as_a_library_writes_the_summary_its_record_names(lab: Path) -> None:
    """The lab takes verdicts through the library, not the CLI: the campaign writes its own summaries."""
    verdict = run_verdict(load_suite(lab / "suite.toml"), lab / "fast", lab / "fast-copy", results=lab / "results")
    assert verdict.summary is not None and verdict.summary.is_file()
    assert f"**Verdict: {verdict.verdict}**" in verdict.summary.read_text()
    assert list((lab / "results" / "calibrate").glob("*.md")), "the calibration it ran first has its summary too"


@pytest.mark.slow
def test_a_virtualenv_python_is_measured_inside_its_virtualenv(tmp_path: Path) -> None:
    """`.venv/bin/python` is a symlink to the base interpreter: run through its target, the venv's packages vanish."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    (site,) = (tmp_path / "venv" / "lib").glob("python*/site-packages")
    (site / "only_in_the_venv.py").write_text("print('imported from the venv')\n")
    assert (tmp_path / "venv" / "bin" / "python").is_symlink()
    (tmp_path / "suite.toml").write_text(
        '[suite]\nname = "venv"\nruns = 6\nmin_runs = 6\ncalibration_runs = 6\n\n'
        '[[scenario]]\nname = "import"\ncommand = ["{bin}", "-c", "import only_in_the_venv"]\n\n'
        '[[metric]]\nname = "stdout_bytes"\nfloor = 0.0\n')
    result = orchard("verdict", "--suite", "suite.toml", "--baseline", "venv/bin/python", "--candidate",
                     "venv/bin/python", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["verdict"] == "NO-CHANGE"


@pytest.mark.slow
@pytest.mark.parametrize("how", ["default", "--no-confine", "no bwrap"])
def test_the_verdict_says_how_its_runs_were_confined(lab: Path, how: str) -> None:
    """Confined where bubblewrap works; `--no-confine` turns it off; without bwrap one line says so, no failure."""
    extra = ["--no-confine"] if how == "--no-confine" else []
    env = {"PATH": "/nonexistent"} if how == "no bwrap" else None
    result = orchard("verdict", "--suite", "suite.toml", "--baseline", "fast", "--candidate", "fast-copy",
                     "--runs", "6", "--json", *extra, cwd=lab, env=env)
    assert result.returncode == 0, result.stderr
    said = json.loads(result.stdout)["confinement"]
    expected = {"default": "measured runs confined", "--no-confine": "measured runs are not confined (turned off)",
                "no bwrap": "measured runs are not confined: bubblewrap (`bwrap`) is not on PATH"}[how]
    assert said.startswith(expected), said
    rows = read_jsonl(lab / json.loads(result.stdout)["rows"])
    isolation = {row["env_isolation_version"] for row in rows}
    assert len(isolation) == 1 and isolation.pop().startswith("2+bwrap.3" if how == "default" else "2")
