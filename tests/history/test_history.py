"""`orchard history` on generated histories: planted steps found at their commits, none on an A/A history.

The rows are written as `orchard bench run` writes them (one JSONL file per
run, five measured rows each, the commit from ORCHARD_COMMIT), with 1% noise
per row; the detector is Apache Otava's, installed by `make test`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from orchard.cli import cli
from orchard.history.series import from_rows
from orchard.lab.db.state import LabState

RUNS = 150
STEPS = {30: 0.05, 70: -0.07, 110: 0.12}  # run index: relative change from there on
DRIFT = 0.0001  # per run: 1.5% over the history, slow enough to be no step


def commit(index: int) -> str:
    return f"{index:040x}"


def write_history(results: Path, steps: dict[int, float], *, drift: float = 0.0, seed: int = 5,
                  machine: str = "m1") -> None:
    """One rows file per run, in the order they ran; `steps` multiply every later run's level."""
    rng = np.random.default_rng(seed)
    lane = results / "bench"
    lane.mkdir(parents=True, exist_ok=True)
    level = 100.0
    for run in range(RUNS):
        level *= 1 + steps.get(run, 0.0)
        rows = [{"schema": 1, "lane": "bench", "subject": "cli", "role": "cli", "scenario": "report", "run": i,
                 "operation": "report", "step_kind": "measured", "returncode": 0, "warmup": False,
                 "commit": commit(run), "machine_fingerprint": machine, "binary_sha256": "ab" * 32,
                 "elapsed_ms": float(level * (1 + drift * run) * (1 + rng.normal(0, 0.01)))} for i in range(5)]
        stamp = f"2026{run:04d}T000000000000Z-{machine}.jsonl"
        (lane / stamp).write_text("".join(json.dumps(r) + "\n" for r in rows))


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, ["history", *map(str, args)])


def test_every_planted_step_is_found_at_its_commit_with_its_size(tmp_path: Path) -> None:
    write_history(tmp_path / "results", STEPS, drift=DRIFT)
    result = invoke("--results", tmp_path / "results", "--json", "--chart", tmp_path / "history.html")
    assert result.exit_code == 0, result.output
    (series,) = json.loads(result.output)["series"]
    assert series["metric"] == "report/wall_ms" and len(series["points"]) == RUNS
    found = {c["commit"]: c for c in series["change_points"]}
    assert set(found) == {commit(run) for run in STEPS}, found  # each at its commit, and no other
    for run, step in STEPS.items():
        assert found[commit(run)]["change"] == pytest.approx(step, abs=0.015)
        assert found[commit(run)]["pvalue"] <= 0.001
    page = (tmp_path / "history.html").read_text()
    assert "Plotly" in page and f"+12.00% at {commit(110)[:10]}" not in page  # the size as measured, not planted
    assert "change point(s)" in page and page.count('"dash": "dash"') == len(STEPS)  # one line per change point
    table = invoke("--results", tmp_path / "results").output.splitlines()
    header = next(line for line in table if "metric" in line)
    assert header.replace("┃", " ").split() == ["metric", "subject", "where", "runs", "change", "at", "run", "commit",
                                                "before", "after", "change", "p-value"]
    rows = [line for line in table if "│" in line]
    assert len(rows) == len(STEPS) and len({line.index("│") for line in rows + [header.replace("┃", "│")]}) == 1
    cells = [cell.strip() for cell in rows[0].split("│")]  # aligned, and every value in its unit
    assert cells[:6] == ["report/wall_ms", "cli", "machine_fingerprint=m1", str(RUNS), "30", commit(30)[:10]]
    assert cells[6].endswith(" ms") and cells[7].endswith(" ms") and cells[8].startswith("+"), cells


def test_an_aa_history_has_no_change_point_and_machines_are_never_mixed(tmp_path: Path) -> None:
    write_history(tmp_path / "results", {}, drift=DRIFT, seed=7)  # seed 7: 0.4-0.5% "changes" below 2%
    write_history(tmp_path / "results", {}, seed=9, machine="m2")
    result = invoke("--results", tmp_path / "results")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == ("no change point: report/wall_ms (cli, 150 runs), "
                                              "report/wall_ms (cli, 150 runs)")
    assert [s.where for s in from_rows(tmp_path / "results")] == ["machine_fingerprint=m1", "machine_fingerprint=m2"]


def test_without_otava_the_command_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_history(tmp_path / "results", {})
    monkeypatch.setitem(sys.modules, "otava", None)  # import otava fails as it does where it is not installed
    result = invoke("--results", tmp_path / "results")
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == (
        "orchard: error: orchard history needs Apache Otava's change-point detector: "
        "pip install 'orchard-lab[history]' && pip install --no-deps apache-otava==0.8.0")


def test_labs_main_over_time_is_one_series_per_metric_across_the_labs(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    for lab, runs in (("lab-one", range(20)), ("lab-two", range(20, 40))):
        (tmp_path / lab).mkdir()
        state = LabState.open(tmp_path / lab)
        try:
            for run in runs:  # main after each merge; lab-two's sixth merge made it 10% slower
                level = 50.0 * (1.10 if run >= 25 else 1.0) * (1 + rng.normal(0, 0.005))
                state.add_measurement("main", commit(run), {"report/wall_ms": level, "report/stdout_bytes": None})
        finally:
            state.close()
    result = invoke("--lab", tmp_path / "lab-one", "--lab", tmp_path / "lab-two", "--json")
    assert result.exit_code == 0, result.output
    (series,) = json.loads(result.output)["series"]
    assert (series["metric"], series["subject"], len(series["points"])) == ("report/wall_ms", "main", 40)
    assert [c["commit"] for c in series["change_points"]] == [commit(25)]
    assert invoke("--lab", tmp_path / "nothing").output.strip().endswith("not a lab workspace (no lab.db)")
