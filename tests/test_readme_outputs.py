"""The README's shown outputs are what orchard prints (issue 33 item 6: they had gone stale).

The test runs the commands a README session shows, as shown, on the example suite, and compares the shape of
what they print with the shape of what the README shows: the tables' columns and rows, the lines' leading words.
Never the numbers, and never what a loud machine may change (which metrics settled, their reasons, advice).
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from tests.helpers import orchard

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
# reasons, advice and warnings name the metrics this run's noise let settle, or what the machine did meanwhile
SETTLED_BY_NOISE = ("  - ", "advice:", "warning:")


def sessions(text: str) -> list[list[tuple[str, list[str]]]]:
    """Each ```console block as (command, the lines it printed) pairs."""
    found = []
    for block in re.findall(r"^```console\n(.*?)^```", text, flags=re.S | re.M):
        steps: list[tuple[str, list[str]]] = []
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            elif steps:
                steps[-1][1].append(line)
        found.append(steps)
    return found


def shape(lines: list[str]) -> list[str]:
    """What a reader recognises in printed lines, without their numbers: a table's header cells, each row's first
    cell (a continued row: `+`), and every other line's leading words."""
    shown = []
    for line in lines:
        if line.startswith(SETTLED_BY_NOISE) or not line.strip() or set(line.strip()) <= set("━╇"):
            continue
        if "┃" in line:
            shown.append("columns: " + " | ".join(cell.strip() for cell in line.split("┃")))
        elif "│" in line:
            shown.append("row: " + (line.split("│")[0].strip() or "+"))
        else:
            shown.append("line: " + (re.match(r"[A-Za-z/ -]*", line.strip()) or re.match("", "")).group(0).strip())
    return shown


def test_a_readme_session_is_read_as_commands_and_their_output() -> None:
    """The check itself: sessions, steps and shapes as a reader sees them."""
    text = "```console\n$ orchard x\n a ┃ b\n━━╇━━\n m │ 1.0\n   │ 2x\nverdict: PASS\n  - why\n$ echo $?\n0\n```\n"
    [[(command, lines), (echo, code)]] = sessions(text)
    assert (command, echo, code) == ("orchard x", "echo $?", ["0"])
    assert shape(lines) == ["columns: a | b", "row: m", "row: +", "line: verdict"]


@pytest.mark.slow
def test_the_verdict_walk_through_prints_what_the_readme_shows(tmp_path: Path) -> None:
    section = README.read_text().split("## A verdict, worked\n", 1)[1].split("\n## ", 1)[0]
    steps = [step for session in sessions(section) for step in session]
    assert steps[0][0] == "cd examples/verdict", steps
    shutil.copytree(ROOT / "examples" / "verdict", tmp_path / "verdict")
    ran = 0
    for command, shown in steps:
        words = shlex.split(command)
        if words[0] != "orchard":
            continue  # `cd` is the working directory below; `echo $?` depends on what the noise let settle
        done = orchard(*words[1:], cwd=tmp_path / "verdict")
        assert done.returncode in (0, 1), done.stderr
        assert shape(done.stdout.splitlines()) == shape(shown), (command, done.stdout)
        ran += 1
    assert ran == 2, "the README's calibrate and verdict were run"
