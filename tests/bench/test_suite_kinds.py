"""Rows harnesses, python callables and the gates that read their fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import orchard

HARNESS = '''
import json, subprocess, sys
binary = sys.argv[1]
out = subprocess.run([binary], capture_output=True, text=True).stdout.split()
values = dict(zip(out[::2], out[1::2]))
print("harness chatter that is not a row")
print(json.dumps({"operation": "task_loop.edit", "tool_call_count": 1, "estimated_total_tokens": 10,
                  "remote_transport": values.get("transport", "local")}))
print(json.dumps({"operation": "task_loop.total", "tool_call_count": int(values["calls"]),
                  "estimated_total_tokens": int(values["tokens"]), "oracle_passed": values["oracle"] == "1",
                  "remote_transport": values.get("transport", "local")}))
'''

SUITE = '''
[suite]
name = "rows"
runs = 6
min_runs = 6
calibration_runs = 6

[[scenario]]
name = "task"
kind = "rows"
command = ["python3", "{suite_dir}/harness.py", "{bin}"]
where = { operation = "task_loop.total" }

[[scenario]]
name = "callable"
kind = "python"
callable = "lane:measure"

[[metric]]
name = "estimated_total_tokens"
scenarios = ["task", "callable"]

[[metric]]
name = "tool_call_count"
scenarios = ["task"]

[[metric]]
name = "oracle_passed"
compare = false

[[gate]]
kind = "no_drop"
metric = "oracle_passed"
scenarios = ["task"]

[[gate]]
kind = "command"
name = "binary answers"
command = ["{bin}"]
'''

LANE = '''
import subprocess
def measure(binary, workdir, run, fixtures):
    out = subprocess.run([str(binary)], capture_output=True, text=True).stdout.split()
    values = dict(zip(out[::2], out[1::2]))
    return [{"operation": "lane.total", "estimated_total_tokens": int(values["tokens"]) * 2, "returncode": 0}]
'''


def subject(
    directory: Path, name: str, calls: int = 5, tokens: int = 1200, oracle: int = 1, transport: str = "local"
) -> str:
    path = directory / name
    path.write_text(f"#!/bin/sh\necho calls {calls} tokens {tokens} oracle {oracle} transport {transport}\n")
    path.chmod(0o755)
    return name


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    (tmp_path / "harness.py").write_text(HARNESS)
    (tmp_path / "lane.py").write_text(LANE)
    (tmp_path / "suite.toml").write_text(SUITE)
    subject(tmp_path, "base")
    return tmp_path


def verdict(lab: Path, candidate: str) -> tuple[int, dict]:
    result = orchard(
        "verdict", "--suite", "suite.toml", "--baseline", "base", "--candidate", candidate, "--json", cwd=lab
    )
    assert result.returncode in (0, 1), result.stderr
    return result.returncode, json.loads(result.stdout)


@pytest.mark.slow
def test_fewer_tokens_and_calls_from_a_rows_harness_pass_exactly(lab: Path) -> None:
    code, report = verdict(lab, subject(lab, "lean", calls=4, tokens=900))
    assert code == 0 and report["verdict"] == "PASS"
    by_key = {m["key"]: m for m in report["metrics"]}
    assert by_key["task/estimated_total_tokens"]["effect"] == pytest.approx(-0.25)
    assert by_key["task/tool_call_count"]["verdict"] == "improved"
    assert by_key["callable/estimated_total_tokens"]["method"] == "exact"
    assert all(m["method"] == "exact" for m in report["metrics"])
    assert "task/oracle_passed" not in by_key  # recorded for the gate, not judged


@pytest.mark.slow
def test_oracle_drop_is_regressed_despite_token_win(lab: Path) -> None:
    code, report = verdict(lab, subject(lab, "cheat", tokens=300, oracle=0))
    assert code == 1 and report["verdict"] == "REGRESSED"
    assert any(g["name"] == "no_drop" and not g["passed"] for g in report["gates"])


@pytest.mark.slow
def test_rows_from_unlike_transports_are_never_compared(lab: Path) -> None:
    code, report = verdict(lab, subject(lab, "networked", transport="network"))
    assert code == 1 and report["verdict"] == "ERROR"
    assert "remote_transport" in report["reasons"][0] and "not comparable" in report["reasons"][0]


@pytest.mark.slow
def test_custom_command_gate_runs_on_the_candidate(lab: Path) -> None:
    broken = lab / "broken"
    broken.write_text("#!/bin/sh\nexit 4\n")
    broken.chmod(0o755)
    code, report = verdict(lab, "broken")
    assert code == 1 and report["verdict"] == "REGRESSED"
    gate = next(g for g in report["gates"] if g["name"] == "binary answers")
    assert not gate["passed"] and "exit 4" in gate["detail"]
