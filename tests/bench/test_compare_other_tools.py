"""`orchard compare OLD NEW` on other tools' result files, detected by content, with the verdict's table.

The files in data/other-tools are the tools' own output, written here by hyperfine 1.15 (`-N --runs 8
--export-json`: `sleep 0.01`, then `sleep 0.03`), pyperf 2.11 (`timeit --processes 3 --values 3`:
`sum(range(100))`, then `sum(range(2000))`) and pytest-benchmark (`--benchmark-save-data`: sorting 200, then
20,000 numbers; 20 rounds, then 8); the Google Benchmark pair is the reader's sample file with 10 repetitions,
the new one 30% slower.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import orchard

DATA = Path(__file__).parent / "data" / "other-tools"

CASES = {  # tool: (metrics judged, paired)
    "hyperfine": (["sleep 0.01/wall_ms"], True),
    "pyperf": (["sum/wall_ms"], True),
    "pytest-benchmark": (["test_work.py::test_sort/wall_ms"], False),  # 20 rounds against 8: they do not line up
    "google-benchmark": (["BM_Tokenize/1024/wall_ms", "BM_Tokenize/1024/cpu_ms"], True),
}


@pytest.mark.parametrize("tool", list(CASES))
def test_a_slower_new_file_of_each_tool_is_regressed(tool: str) -> None:
    keys, paired = CASES[tool]
    done = orchard("compare", DATA / f"{tool}-old.json", DATA / f"{tool}-new.json", "--json")
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    assert document["verdict"] == "REGRESSED" and document["paired"] is paired
    assert [(m["key"], m["verdict"]) for m in document["metrics"]] == [(key, "regressed") for key in keys]
    if not paired:
        assert document["warnings"] == ["test_work.py::test_sort: runs do not line up (20 old, 8 new): "
                                        "compared unpaired"]


def test_the_same_file_twice_is_no_change_and_the_table_is_the_verdicts() -> None:
    done = orchard("compare", DATA / "google-benchmark-old.json", DATA / "google-benchmark-old.json")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "paired comparison of" in text and "verdict: NO-CHANGE" in text
    assert "BM_Tokenize/1024/cpu_ms │ no-change │ +0.00%" in text


def test_hyperfines_one_command_in_each_file_is_compared_whatever_its_command_line() -> None:
    done = orchard("compare", DATA / "hyperfine-old.json", DATA / "hyperfine-new.json", "--json")
    assert "one benchmark in each file: sleep 0.01 (old) compared with sleep 0.03 (new)" in \
        json.loads(done.stdout)["warnings"]


def test_files_of_two_tools_or_of_a_tool_and_orchard_are_refused(tmp_path: Path) -> None:
    mixed = orchard("compare", DATA / "hyperfine-old.json", DATA / "pyperf-new.json")
    assert mixed.returncode == 2
    assert mixed.stderr.strip() == (f"orchard: error: {DATA / 'hyperfine-old.json'} holds hyperfine results and "
                                    f"{DATA / 'pyperf-new.json'} pyperf results: compare two files of one tool")
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"scenario": "s", "step_kind": "measured", "run": 1, "returncode": 0,
                                "elapsed_ms": 3.0}) + "\n")
    against = orchard("compare", rows, DATA / "hyperfine-new.json")
    assert against.returncode == 2 and "holds orchard rows and" in against.stderr
