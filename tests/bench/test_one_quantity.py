"""One meaning per metric: a rows scenario's wall_ms is the harness's own samples in `verdict`, `bench run`,
`compare` and `history` alike, never the harness process's time; two quantities under one name are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import orchard

# hyperfine's --export-json, after a slow start: the harness process takes 300 ms or more, each sample 10 ms
HARNESS = """
import json, subprocess, sys, time
time.sleep(0.3)
subprocess.run([sys.argv[1]], check=True)
print(json.dumps({"results": [{"command": "prog", "mean": 0.01, "times": [0.01, 0.01, 0.01],
                               "exit_codes": [0, 0, 0]}]}))
"""

SUITE = """
[suite]
name = "tool"

[[scenario]]
name = "report"
kind = "rows"
format = "hyperfine"
aggregate = "mean"
command = ["python3", "{suite_dir}/harness.py", "{bin}"]

[[metric]]
name = "wall_ms"
"""


def _bench(tmp_path: Path) -> Path:
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "harness.py").write_text(HARNESS)
    suite = tmp_path / "bench" / "suite.toml"
    suite.write_text(SUITE)
    return suite


@pytest.mark.slow
def test_bench_run_compare_and_history_read_the_harness_samples_the_verdict_judges(tmp_path: Path) -> None:
    suite, results = _bench(tmp_path), tmp_path / "results"
    files = []
    for _ in range(2):
        done = orchard("bench", "run", "--suite", suite, "--subject", "prog=/bin/true", "--runs", "3", "--json",
                       "--results", results)
        assert done.returncode == 0, done.stderr
        document = json.loads(done.stdout)
        assert [r["medians"]["wall_ms"] for r in document["results"]] == [10.0]  # not the harness's 300 ms
        assert "| report | prog | 3 | 0 | 10.0 ms |" in Path(document["summary"]).read_text()
        files.append(document["rows"])
    rows = [json.loads(line) for line in Path(files[0]).read_text().splitlines()]
    measured = [row for row in rows if row.get("step_kind") == "measured"]
    assert all(row["harness_metrics"] == {"wall_ms": 10.0} and row["elapsed_ms"] >= 300 for row in measured)
    compared = orchard("compare", *files, "--json")
    assert compared.returncode == 0, compared.stderr
    [metric] = [m for m in json.loads(compared.stdout)["metrics"] if m["key"] == "report/wall_ms"]
    assert (metric["baseline_median"], metric["candidate_median"]) == (10.0, 10.0)
    history = orchard("history", "--results", results, "--json")
    assert history.returncode == 0, history.stderr
    [series] = [s for s in json.loads(history.stdout)["series"] if s["metric"] == "report/wall_ms"]
    assert [point["value"] for point in series["points"]] == [10.0, 10.0]


def _row(run: int, **fields: object) -> dict[str, object]:
    return {"scenario": "report", "operation": "report", "subject": "prog", "step_kind": "measured", "run": run,
            "returncode": 0, "machine_fingerprint": "m", **fields}


def test_a_harness_metric_beside_the_same_metric_of_a_process_is_refused(tmp_path: Path) -> None:
    """An older rows file (the harness process's time as wall_ms) and a newer one (the harness's samples)."""
    results = tmp_path / "results" / "bench"
    results.mkdir(parents=True)
    old, new = results / "20260101T000000000000Z.jsonl", results / "20260102T000000000000Z.jsonl"
    old.write_text("".join(json.dumps(_row(run, elapsed_ms=310.0 + run)) + "\n" for run in range(1, 7)))
    new.write_text("".join(json.dumps(_row(run, elapsed_ms=305.0 + run, harness_metrics={"wall_ms": 10.0})) + "\n"
                           for run in range(1, 7)))
    compared = orchard("compare", old, new)
    assert compared.returncode == 2
    assert (f"{old} and {new}: report/wall_ms holds the measured process's own numbers in one and the harness's own "
            "samples in the other, two quantities under one name") in compared.stderr
    history = orchard("history", "--results", tmp_path / "results")
    assert history.returncode == 2 and "two quantities under one name" in history.stderr
    assert len(compared.stderr.strip().splitlines()) == 1
