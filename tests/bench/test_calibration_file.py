"""Calibrations survive ephemeral CI runners: no hostname in the fingerprint; calibration files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchard.bench.sandbox.confinement import UNCONFINED
from tests.helpers import make_binary, make_suite, orchard

needs_unshare = pytest.mark.skipif(shutil.which("unshare") is None, reason="unshare (util-linux) not installed")


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    make_binary(tmp_path, "fast")
    make_binary(tmp_path, "fast-copy")
    make_suite(tmp_path, runs=8, calibration_runs=8)
    return tmp_path


def _verdict_json(result: subprocess.CompletedProcess[str]) -> dict:
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


@pytest.mark.slow
@needs_unshare
def test_a_calibration_made_under_one_hostname_is_reused_under_another(lab: Path) -> None:
    made = orchard("calibrate", "--suite", "suite.toml", "--baseline", "fast", "--runs", "8", cwd=lab)
    assert made.returncode == 0, made.stderr
    # a new UTS namespace: the same hardware under another name, as on a fresh CI runner
    renamed = subprocess.run(
        [
            "unshare",
            "--uts",
            "sh",
            "-c",
            'hostname "$0" && exec "$@"',
            "ephemeral-runner-7f3a",
            sys.executable,
            "-m",
            "orchard",
            "verdict",
            "--suite",
            "suite.toml",
            "--baseline",
            "fast",
            "--candidate",
            "fast-copy",
            "--json",
        ],
        cwd=lab,
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = _verdict_json(renamed)
    assert report["calibration"]["cached"] is True, renamed.stderr


@pytest.mark.slow
def test_a_calibration_file_is_written_and_reused_on_a_runner_with_an_empty_cache(lab: Path) -> None:
    made = orchard(
        "calibrate",
        "--suite",
        "suite.toml",
        "--baseline",
        "fast",
        "--runs",
        "8",
        "--calibration",
        "ci/calibration.json",
        cwd=lab,
    )
    assert made.returncode == 0, made.stderr
    stored = json.loads((lab / "ci" / "calibration.json").read_text())
    assert "hostname" not in stored["machine"] and stored["machine"]["cpu_count"] >= 1
    fresh = {"ORCHARD_CACHE_DIR": str(lab / "empty-cache")}
    report = _verdict_json(
        orchard(
            "verdict",
            "--suite",
            "suite.toml",
            "--baseline",
            "fast",
            "--candidate",
            "fast-copy",
            "--json",
            "--calibration",
            "ci/calibration.json",
            cwd=lab,
            env=fresh,
        )
    )
    assert report["calibration"]["cached"] is True
    assert report["calibration"]["file"].endswith("ci/calibration.json")


@pytest.mark.slow
def test_a_suite_names_its_calibration_file(lab: Path) -> None:
    suite = (
        (lab / "suite.toml").read_text().replace('name = "loop"', 'name = "loop"\ncalibration = "calibration.json"', 1)
    )
    (lab / "suite.toml").write_text(suite)
    made = orchard("calibrate", "--suite", "suite.toml", "--baseline", "fast", "--runs", "8", cwd=lab)
    assert made.returncode == 0, made.stderr
    assert (lab / "calibration.json").is_file()
    report = _verdict_json(
        orchard(
            "verdict",
            "--suite",
            "suite.toml",
            "--baseline",
            "fast",
            "--candidate",
            "fast-copy",
            "--json",
            cwd=lab,
            env={"ORCHARD_CACHE_DIR": str(lab / "cache-2")},
        )
    )
    assert report["calibration"]["cached"] is True
    assert report["calibration"]["file"] == str(lab / "calibration.json")


def test_a_calibration_file_from_other_hardware_is_refused_naming_what_differs(lab: Path) -> None:
    made = orchard(
        "calibrate", "--suite", "suite.toml", "--baseline", "fast", "--runs", "8", "--calibration", "cal.json", cwd=lab
    )
    assert made.returncode == 0, made.stderr
    stored = json.loads((lab / "cal.json").read_text())
    stored["machine"]["cpu_model"] = "Imaginary CPU 9000"
    stored["machine"]["cpu_count"] = 128
    (lab / "cal.json").write_text(json.dumps(stored))
    result = orchard(
        "verdict",
        "--suite",
        "suite.toml",
        "--baseline",
        "fast",
        "--candidate",
        "fast-copy",
        "--calibration",
        "cal.json",
        cwd=lab,
    )
    assert result.returncode == 2
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1 and "cal.json" in message
    assert "cpu_model" in message and "Imaginary CPU 9000" in message and "cpu_count" in message
    assert "--recalibrate" in message


@pytest.mark.slow
def test_a_calibration_taken_unconfined_is_not_used_for_confined_runs(lab: Path) -> None:
    """Confined runs carry a fixed cost and other noise: their floors are measured again, never borrowed."""
    made = orchard("calibrate", "--suite", "suite.toml", "--baseline", "fast", "--runs", "8",
                   "--calibration", "cal.json", "--no-confine", cwd=lab)
    assert made.returncode == 0, made.stderr
    unconfined = orchard("verdict", "--suite", "suite.toml", "--baseline", "fast", "--candidate", "fast-copy",
                         "--runs", "6", "--json", "--no-confine", cwd=lab)
    assert _verdict_json(unconfined)["calibration"]["cached"] is True
    confined = orchard("verdict", "--suite", "suite.toml", "--baseline", "fast", "--candidate", "fast-copy",
                       "--runs", "6", "--json", cwd=lab)
    assert _verdict_json(confined)["calibration"]["cached"] is False  # calibrated again, confined
    refused = orchard("verdict", "--suite", "suite.toml", "--baseline", "fast", "--candidate", "fast-copy",
                      "--calibration", "cal.json", cwd=lab)
    unconfined_version = UNCONFINED.isolation
    assert refused.returncode == 2 and f"isolated as '{unconfined_version}'" in refused.stderr, refused.stderr
    assert "--recalibrate" in refused.stderr
