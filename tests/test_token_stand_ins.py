"""Tokens do not depend on where a binary lives or what it is called.

The counted command line renders the binary and every per-run path with a
stable stand-in; rows keep both the counted text and the raw command.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from orchard.bench import tokens
from orchard.jsonlines import read_jsonl
from tests.helpers import make_binary, orchard

TOKENS_SUITE = """
[suite]
name = "tokens"
runs = 6
min_runs = 6
calibration_runs = 6

[[fixture]]
name = "data"
command = ["sh", "-c", "echo hello > {dir}/input.txt"]

[[scenario]]
name = "argv"
command = ["{bin}", "{fixture.data}/input.txt", "{workdir}"]

[[scenario]]
name = "shell"
command = "{bin} {fixture.data}/input.txt > /dev/null; echo done"

[[metric]]
name = "estimated_total_tokens"

[[metric]]
name = "tool_call_count"
"""


def test_identical_binaries_under_other_names_and_directories_count_the_same_tokens(tmp_path: Path) -> None:
    short = make_binary(tmp_path, "a.sh", iterations=10)
    deep = tmp_path / "a" / "much" / "deeper" / "install" / "prefix" / "bin"
    deep.mkdir(parents=True)
    long = deep / "a-much-longer-name-for-the-same-tool.sh"
    shutil.copy2(short, long)
    (tmp_path / "suite.toml").write_text(TOKENS_SUITE)
    result = orchard(
        "verdict",
        "--suite",
        "suite.toml",
        "--baseline",
        short,
        "--candidate",
        long,
        "--json",
        "--results",
        "results",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["verdict"] == "NO-CHANGE", report["reasons"]
    for metric in report["metrics"]:
        assert (metric["method"], metric["verdict"], metric["effect"]) == ("exact", "no-change", 0.0)
    measured = [r for r in read_jsonl(tmp_path / report["rows"]) if r.get("step_kind") == "measured"]
    by_role: dict[str, set[tuple[str, int, str]]] = {"baseline": set(), "candidate": set()}
    for row in measured:
        by_role[row["role"]].add((row["scenario"], row["estimated_total_tokens"], row["counted_command"]))
    assert by_role["baseline"] == by_role["candidate"]
    argv_rows = [r for r in measured if r["scenario"] == "argv"]
    assert {r["counted_command"] for r in argv_rows} == {"BIN FIXTURE_data/input.txt WORKDIR"}
    # the raw command stays in the row, with the real path
    assert any(str(long) in r["command"] for r in argv_rows)
    assert any(str(short) in r["command"] for r in argv_rows)


def test_stand_ins_replace_whole_values_only() -> None:
    stand_ins = tokens.StandIns.of({"/opt/tools/git": "BIN", "/tmp/run-123": "ROOT", "git": "SUBJECT"})
    text = stand_ins.command(
        [
            "/opt/tools/git",
            "clone",
            "/tmp/run-123/remote.git",
            "/tmp/run-123/task_loop-git-r0/base",
            "--branch=bench/task-git-r0",
        ]
    )
    assert text == "BIN clone ROOT/remote.git ROOT/task_loop-SUBJECT-r0/base --branch=bench/task-SUBJECT-r0"
    # a path that needs quoting counts as the same stand-in
    quoted = tokens.StandIns.of({"/a b/tool": "BIN"})
    assert quoted.command("'/a b/tool' --version") == "BIN --version"
    assert quoted.command(["/a b/tool", "--version"]) == "BIN --version"
