"""Instruction counts (opt-in `measure = ["instructions"]`), counted by cachegrind here in untimed runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from orchard.bench import instructions
from orchard.bench.suite import load_suite
from orchard.errors import UsageError
from orchard.jsonlines import read_jsonl
from tests.helpers import make_binary, orchard

needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind not installed")

SUITE = """
[suite]
name = "count"
runs = 8
min_runs = 8
calibration_runs = 6

[[scenario]]
name = "loop"
command = ["{bin}"]
measure = ["instructions"]

[[metric]]
name = "instructions"

[[metric]]
name = "wall_ms"
target = false
"""


@needs_valgrind
def test_counts_scale_with_the_work_and_repeat_exactly(tmp_path: Path) -> None:
    small = make_binary(tmp_path, "small", iterations=1000)
    large = make_binary(tmp_path, "large", iterations=3000)
    counter = instructions.available()
    assert counter in (instructions.Counter.PERF, instructions.Counter.CACHEGRIND)
    a, b = (instructions.count([small], counter=counter) for _ in range(2))
    c = instructions.count([large], counter=counter)
    assert a.instructions and b.instructions and c.instructions
    assert abs(a.instructions - b.instructions) / a.instructions < 0.001  # near-deterministic
    assert c.instructions > a.instructions * 1.3  # the extra loop iterations show
    assert a.row_fields()["instructions_counter"] == str(counter)


def test_a_command_that_cannot_be_counted_says_why(tmp_path: Path) -> None:
    missing = instructions.count(["/bin/true"], counter=None)
    assert missing.instructions is None and "valgrind" in missing.failure


@pytest.mark.parametrize(
    ("scenario", "message"),
    [
        ('name = "s"\ncommand = ["{bin}"]\nmeasure = ["cycles"]', "'measure' knows instructions, not cycles"),
        ('name = "s"\nkind = "rows"\ncommand = ["{bin}"]\nmeasure = ["instructions"]', "command scenarios"),
        ('name = "s"\ncommand = ["{bin}"]\n[[metric]]\nname = "instructions"', 'add measure = ["instructions"]'),
    ],
)
def test_bad_measure_settings_are_named(tmp_path: Path, scenario: str, message: str) -> None:
    path = tmp_path / "suite.toml"
    path.write_text(f"[[scenario]]\n{scenario}\n")
    with pytest.raises(UsageError, match="suite .*" + message.replace("[", r"\[").replace("(", r"\(")):
        load_suite(path)


@needs_valgrind
@pytest.mark.slow
def test_a_two_percent_shift_in_work_is_regressed_on_instructions_and_identical_copies_are_not(tmp_path: Path) -> None:
    make_binary(tmp_path, "base", iterations=20000)
    make_binary(tmp_path, "copy", iterations=20000)
    make_binary(tmp_path, "more", iterations=20400)
    (tmp_path / "suite.toml").write_text(SUITE)
    same = orchard(
        "verdict", "--suite", "suite.toml", "--baseline", "base", "--candidate", "copy", "--json", cwd=tmp_path
    )
    assert same.returncode == 0, same.stderr
    report = json.loads(same.stdout)
    metric = next(m for m in report["metrics"] if m["metric"] == "instructions")
    assert metric["verdict"] in ("no-change", "inconclusive") and metric["floor"] < 0.01
    rows = [r for r in read_jsonl(tmp_path / report["rows"]) if r.get("step_kind") == "measured"]
    assert all(r["instructions_counter"] in ("perf", "cachegrind") and r["instructions"] > 0 for r in rows)
    more = orchard(
        "verdict", "--suite", "suite.toml", "--baseline", "base", "--candidate", "more", "--json", cwd=tmp_path
    )
    assert more.returncode == 1, more.stderr
    metric = next(m for m in json.loads(more.stdout)["metrics"] if m["metric"] == "instructions")
    assert metric["verdict"] == "regressed" and 0.01 < metric["effect"] < 0.03
