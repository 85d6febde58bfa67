"""The patch worker on its own: a real checkout, real commands, the report it leaves."""

from __future__ import annotations

import json
from pathlib import Path

from orchard.lab.workers.launchers import patch_worker
from orchard.lab.workers.workspace import report
from tests.lab.lab_helpers import TARGET_FILES, make_repo

GOOD = "--- a/src/alpha.txt\n+++ b/src/alpha.txt\n@@ -1 +1 @@\n-alpha 1\n+alpha 2\n"


def _run(tmp_path: Path, patch: str, **steps: str) -> tuple[int, dict]:
    target = tmp_path / "target"
    if not target.exists():
        make_repo(target, TARGET_FILES)
    patch_file = tmp_path / "change.diff"
    patch_file.write_text(patch)
    out = tmp_path / "report.json"
    argv = ["--experiment", "e1", "--patch", str(patch_file), "--target", str(target),
            "--bench", str(tmp_path), "--report", str(out)]
    for key, command in steps.items():
        argv += [f"--{key}", command]
    code = patch_worker.main(argv)
    data = json.loads(out.read_text())
    assert report.validate(data, "e1") == []
    return code, data


def test_a_patch_that_does_not_apply_is_reported_as_failed(tmp_path: Path) -> None:
    code, data = _run(tmp_path, GOOD.replace("alpha 1", "omega 9"), build="true")
    assert code == 1 and data["status"] == "failed" and "did not apply" in data["summary"]
    assert data["build"] is None and data["measurements"] == []


def test_a_failing_step_stops_the_worker_and_is_named(tmp_path: Path) -> None:
    code, data = _run(tmp_path, GOOD, build="true", test="grep -q 'alpha 3' src/alpha.txt",
                      measure="echo never")
    assert code == 0 and data["status"] == "failed"  # it finished: its report says the step failed
    assert data["tests"]["exit_code"] == 1 and data["measure"] is None
    assert "the test step failed (exit 1)" in data["summary"]
    assert data["changed_files"] == ["src/alpha.txt"]


def test_measure_output_that_is_not_report_shaped_claims_no_measurements(tmp_path: Path) -> None:
    code, data = _run(tmp_path, GOOD, measure="echo '{\"PASS\": true}'")
    assert code == 0 and data["status"] == "done"
    assert data["measure"]["output"] == {"PASS": True} and data["measurements"] == []


def test_a_bench_patch_that_cannot_be_applied_fails_the_worker(tmp_path: Path) -> None:
    # in the sandbox the bench clone is read-only: the tamper attempt fails, and the worker says so
    bench_patch = tmp_path / "bench.diff"
    bench_patch.write_text("--- a/suite.toml\n+++ b/suite.toml\n@@ -1 +1 @@\n-runs = 20\n+runs = 2\n")
    code, data = _run(tmp_path, GOOD, **{"bench-patch": str(bench_patch)}, build="true")
    assert code == 1 and data["status"] == "failed" and "the bench patch did not apply" in data["summary"]
    assert data["build"] is None  # nothing after the attempt ran
