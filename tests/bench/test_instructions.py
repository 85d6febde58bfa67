"""Instruction counts (opt-in `measure = ["instructions"]`), counted by cachegrind here in untimed runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from orchard.bench.measuring import instructions
from orchard.bench.suites.suite_reader import load_suite
from orchard.errors import UsageError
from orchard.jsonlines import read_jsonl
from tests.helpers import make_binary, needs_valgrind, orchard

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
        (
            'name = "s"\ncommand = ["{bin}"]\nmeasure = ["cycles"]',
            "'measure' knows instructions, estimated_cycles, not cycles",
        ),
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
    # identical counts in A/A: the candidate counted once, not once per pair, and the calibrated baseline not at
    # all (its count is the calibration's: binary_counts.py)
    rows = [r for r in read_jsonl(tmp_path / report["rows"]) if r.get("step_kind") == "counted"]
    assert all(r["instructions_counter"] in ("perf", "cachegrind") and r["instructions"] > 0 for r in rows)
    assert metric["method"] == "counted-per-binary" and [Path(r["binary"]).name for r in rows] == ["copy"]
    more = orchard(
        "verdict", "--suite", "suite.toml", "--baseline", "base", "--candidate", "more", "--json", cwd=tmp_path
    )
    assert more.returncode == 1, more.stderr
    metric = next(m for m in json.loads(more.stdout)["metrics"] if m["metric"] == "instructions")
    assert metric["verdict"] == "regressed" and 0.01 < metric["effect"] < 0.03


CYCLES_SUITE = """
[suite]
name = "cycles"

[[scenario]]
name = "loop"
command = ["{bin}"]
measure = ["estimated_cycles"]

[[metric]]
name = "estimated_cycles"
"""


@pytest.mark.slow
@needs_valgrind
def test_estimated_cycles_weigh_the_simulated_cache_accesses_and_repeat(tmp_path: Path) -> None:
    small = make_binary(tmp_path, "small", iterations=1000)
    large = make_binary(tmp_path, "large", iterations=3000)
    a, b = (instructions.count([small], counter=None, cycles=True) for _ in range(2))
    c = instructions.count([large], counter=None, cycles=True)
    assert a.counter is instructions.Counter.CACHEGRIND  # perf cannot estimate: always the cache simulation
    assert a.instructions and a.estimated_cycles and b.estimated_cycles and c.estimated_cycles
    # every access weighs at least one cycle, and data accesses come on top of instruction reads
    assert a.estimated_cycles > a.instructions
    assert abs(a.estimated_cycles - b.estimated_cycles) / a.estimated_cycles < 0.01
    assert c.estimated_cycles > a.estimated_cycles * 1.3
    fields = a.row_fields()
    assert fields["estimated_cycles"] == a.estimated_cycles and "35 x RAM" in str(fields["estimated_cycles_formula"])
    plain = instructions.count([small], counter=instructions.Counter.CACHEGRIND)
    assert plain.estimated_cycles is None and "estimated_cycles" not in plain.row_fields()


def test_the_estimate_is_the_documented_formula() -> None:
    events = {"Ir": 1000, "I1mr": 10, "ILmr": 2, "Dr": 300, "D1mr": 20, "DLmr": 5, "Dw": 100, "D1mw": 6, "DLmw": 1}
    # L1 hits 1400 - 36, LL hits 36 - 8, RAM accesses 8
    assert instructions.estimated_cycles(events) == 1364 + 5 * 28 + 35 * 8
    assert instructions.estimated_cycles({"Ir": 1000}) is None  # no cache simulation, no estimate


@needs_valgrind
@pytest.mark.slow
def test_a_suite_measures_estimated_cycles_in_its_rows(tmp_path: Path) -> None:
    make_binary(tmp_path, "tool", iterations=1000)
    (tmp_path / "suite.toml").write_text(CYCLES_SUITE)
    result = orchard(
        "bench", "run", "--suite", "suite.toml", "--subject", "tool=tool", "--runs", "2", "--json",
        "--results", "results", cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    rows = [r for path in (tmp_path / "results").rglob("*.jsonl") for r in read_jsonl(path)]
    measured = [r for r in rows if r.get("estimated_cycles") is not None]
    assert len(measured) == 2 and all(r["instructions_counter"] == "cachegrind" for r in measured)
    assert all(r["estimated_cycles"] > r["instructions"] > 0 for r in measured)


@needs_valgrind
@pytest.mark.slow
def test_a_five_percent_shift_in_work_is_regressed_on_estimated_cycles(tmp_path: Path) -> None:
    make_binary(tmp_path, "base", iterations=2000)
    make_binary(tmp_path, "more", iterations=2100)
    (tmp_path / "suite.toml").write_text(CYCLES_SUITE)
    more = orchard(
        "verdict", "--suite", "suite.toml", "--baseline", "base", "--candidate", "more", "--json", cwd=tmp_path
    )
    assert more.returncode == 1, more.stderr
    metric = next(m for m in json.loads(more.stdout)["metrics"] if m["metric"] == "estimated_cycles")
    assert metric["verdict"] == "regressed" and 0.03 < metric["effect"] < 0.07


@pytest.mark.slow  # two cachegrind runs: ~12 s on a loaded 2-core machine
@pytest.mark.skipif(shutil.which("bwrap") is None or shutil.which("valgrind") is None,
                    reason="needs bubblewrap and valgrind")
def test_a_cache_between_counting_runs_is_impossible_confined(tmp_path: Path) -> None:
    """A program that does its work once and then answers from a cache in $TMPDIR: its counting runs are confined
    like its timed runs (issue 20), so its second count is its first, not a fraction of it."""
    from orchard.bench.measuring.measure import RunSpec, observe, workbench
    from orchard.bench.sandbox.confinement import confine_runs

    program = tmp_path / "bin" / "cached"
    program.parent.mkdir(mode=0o755)
    program.write_text('#!/bin/sh\n[ -f "$TMPDIR/done" ] && exit 0\ni=0; while [ $i -lt 3000 ]; do i=$((i+1)); done\n'
                       'touch "$TMPDIR/done"\n')
    program.chmod(0o755)
    tmp_path.chmod(0o755)
    (tmp_path / "suite.toml").write_text('[suite]\nname = "c"\n\n[[scenario]]\nname = "run"\ncommand = ["{bin}"]\n'
                                         'measure = ["instructions"]\n\n[[metric]]\nname = "instructions"\n')
    suite = load_suite(tmp_path / "suite.toml")
    with workbench(suite, confinement=confine_runs(True, reads=[tmp_path])) as bench:
        first, second = (observe(bench, suite.scenarios[0], program, RunSpec("candidate", {"name": "c"}, run, {},
                                                                              {"instructions"})) for run in (0, 1))
    assert first.ok and second.ok, (first.failure, second.failure)
    assert (second.values["instructions"] or 0) > 0.9 * (first.values["instructions"] or 0), (first.values,
                                                                                            second.values)
