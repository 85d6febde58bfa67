"""The command line's smaller promises: -V, --quiet, --json everywhere, bad --results, Ctrl-C, short intervals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from orchard import __version__
from orchard.bench.lock import MeasurementLock
from tests.helpers import ORCHARD, make_binary, make_suite, orchard


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    make_binary(tmp_path, "fast")
    make_suite(tmp_path, runs=8, calibration_runs=8)
    return tmp_path


def test_dash_capital_v_prints_the_version() -> None:
    result = orchard("-V")
    assert result.returncode == 0 and result.stdout.strip() == f"orchard, version {__version__}"


def test_results_pointing_at_a_file_is_one_line_and_exit_2(lab: Path) -> None:
    (lab / "results-file").write_text("not a directory\n")
    for command in (["verdict", "--candidate", "fast"], ["calibrate"]):
        result = orchard(*command, "--suite", "suite.toml", "--baseline", "fast", "--results", "results-file", cwd=lab)
        assert result.returncode == 2
        assert result.stderr.strip().splitlines() == [
            "orchard: error: --results results-file: not a directory (a file is in the way)"
        ]
    assert (lab / "results-file").read_text() == "not a directory\n"


@pytest.mark.slow
def test_calibrate_and_bench_run_speak_json_and_short_intervals_say_so(lab: Path) -> None:
    text = orchard("calibrate", "--suite", "suite.toml", "--baseline", "fast", "--runs", "6", cwd=lab)
    assert text.returncode == 0, text.stderr
    assert "no interval at this n" in text.stdout and "-100.00%" not in text.stdout
    cal = orchard("calibrate", "--suite", "suite.toml", "--baseline", "fast", "--runs", "6", "--json", cwd=lab)
    data = json.loads(cal.stdout)
    assert data["runs"] == 6 and "loop/wall_ms" in data["metrics"] and "hostname" not in data["machine"]
    run = orchard("bench", "run", "--suite", "suite.toml", "--subject", "fast=fast", "--runs", "3", "--json", cwd=lab)
    report = json.loads(run.stdout)
    assert report["schema"] == "orchard.bench-run/1"
    (entry,) = report["results"]
    assert entry["subject"] == "fast" and entry["runs"] == 3 and entry["medians"]["wall_ms"] > 0


@pytest.mark.slow
def test_quiet_leaves_only_the_result(lab: Path) -> None:
    """Also while another measurement holds the lock: the wait is in the rows, not on the terminal."""
    same = ("--baseline", "fast", "--candidate", "fast", "--measure-identical")  # one program, measured all the same
    loud = orchard("verdict", "--suite", "suite.toml", *same, "--json", cwd=lab)
    assert "pair order seed" in loud.stderr
    held = threading.Event()

    def another_verdict() -> None:
        with MeasurementLock("another verdict", path=Path(os.environ["ORCHARD_LOCK_FILE"])):
            held.set()
            time.sleep(1.0)  # the quiet verdict waits for it

    holder = threading.Thread(target=another_verdict)
    holder.start()
    held.wait(timeout=10)
    quiet = orchard("-q", "verdict", "--suite", "suite.toml", *same, "--json", cwd=lab)
    holder.join()
    assert quiet.returncode == 0 and quiet.stderr.strip() == "", quiet.stderr
    assert json.loads(quiet.stdout)["verdict"]


def test_an_interrupted_run_says_so_in_its_summary(lab: Path) -> None:
    make_binary(lab, "slowish", iterations=200000)
    proc = subprocess.Popen(
        [*ORCHARD, "bench", "run", "--suite", "suite.toml", "--subject", "s=slowish", "--runs", "200"],
        cwd=lab,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            files = list((lab / "results" / "bench").glob("*.jsonl")) if (lab / "results" / "bench").is_dir() else []
            if files and files[0].read_text().count("\n") >= 2:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    summary = next((lab / "results" / "bench").glob("*.md")).read_text()
    assert summary.startswith("**Interrupted** (Ctrl-C) after ")
    rows = [json.loads(line) for line in files[0].read_text().splitlines()]
    assert rows[-1]["step_kind"] == "interrupted"
