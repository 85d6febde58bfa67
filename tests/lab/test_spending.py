"""What a lab spent, per launcher and in total, and the `[stop]` budgets left, from a real `orchard run`.

Two agent CLIs (the recording stand-ins, tests/lab/standin.py, first on
PATH) each work one hypothesis: Claude Code's result carries its cost and
tokens, Codex's events carry tokens and no cost (estimated from them, and
said so: on main it was "not reported"). FINAL_REPORT, the
dashboard's state and `orchard status` must add up what each reported, with
the lab's own worker, build and measurement times, and say how much of
`max_cost_usd` and `max_wall_minutes` is left.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from orchard.lab.db.state import LabState
from orchard.lab.notebook import view
from orchard.lab.workers.workspace.workspace import Workspace
from orchard.lab.workers.workspace.workspace_init import init_workspace
from tests.lab.lab_helpers import ALPHA_TARGET, STDOUT_SUITE, lab_config, one_worker

CONFIG = lab_config(
    target=ALPHA_TARGET,
    workers=one_worker(timeout_minutes=2),
    launcher={"name": "claude"},
    launchers={"codex": {"name": "codex"}},
    stop={"top_attempted": 9, "max_cost_usd": 1.0, "max_wall_minutes": 600},
)
HYPOTHESES = """
[[hypothesis]]
id = "by-claude"
metric = "out/stdout_bytes"
change = "shorter alpha"
scope = ["src/alpha.txt"]
impact = 5

[[hypothesis]]
id = "by-codex"
metric = "out/stdout_bytes"
change = "shorter beta"
scope = ["src/beta.txt"]
launcher = "codex"
impact = 4
"""
CLAUDE_COST = 0.0123  # what the stand-in's Claude Code result reports
CODEX_COST = (1000 * 1.25 + 200 * 0.125 + 100 * 10.0) / 1e6  # its tokens at config/prices.py's `default` price


def _orchard(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchard", *map(str, args)], capture_output=True, text=True,
                          timeout=600, env=env, check=False)


@pytest.mark.slow  # a whole `orchard run`: two agent workers, two verdicts
def test_a_lab_reports_what_each_launcher_spent_and_the_budgets_left(
        tmp_path: Path, target_repo: Path, standin_bin: Path) -> None:
    (tmp_path / "suite.toml").write_text(STDOUT_SUITE)
    (tmp_path / "orchard.toml").write_text(CONFIG)
    (tmp_path / "hypotheses.toml").write_text(HYPOTHESES)
    ws = init_workspace(tmp_path / "ws", str(target_repo), None, tmp_path / "orchard.toml")
    env = {**os.environ, "PATH": f"{standin_bin}:{os.environ['PATH']}"}
    for args in (("backlog", "add", ws.root, "--file", tmp_path / "hypotheses.toml"), ("run", ws.root)):
        done = _orchard(*args, env=env)
        assert done.returncode == 0, done.stdout + done.stderr

    report = (ws.root / "FINAL_REPORT.md").read_text()
    section = report.split("## What it cost")[1]
    table = [line for line in section.splitlines() if line.startswith("|")][2:]  # below the header
    rows = {cells[0]: cells for cells in ([c.strip() for c in line.strip("|").split("|")] for line in table)}
    assert rows["`claude`"][1:5] == ["1", "0", f"${CLAUDE_COST:.4f}", "1,200 input, 340 output, 5,000 cache-read, "
                                                                      "800 cache-write"]
    # Codex prints tokens, no cost: estimated at its default model's price (1,000 uncached, 200 cached, 100 out)
    assert rows["`codex`"][1:5] == ["1", "0", f"${CODEX_COST:.4f} (estimated)", "1,200 input, 100 output, "
                                                                               "200 cache-read"]
    assert rows["all launchers"][1:4] == ["2", "0", f"${CLAUDE_COST + CODEX_COST:.4f} (estimated)"]
    for cells in rows.values():  # the workers ran and the judge built and measured: none of it is zero
        assert all(re.fullmatch(r"[\d.,]+ (ms|s|min)", cell) for cell in cells[5:8]), cells
        assert cells[9:] == ["-", "-"]  # no win kept, so no cost or time per win
    assert "no win was kept" in section

    root = Workspace.open(ws.root)
    state = LabState.open(ws.root)
    try:  # the dashboard's state carries the same totals
        shown = json.loads(view.to_json(view.build(root, state, live=False)))
    finally:
        state.close()
    assert [s["launcher"] for s in shown["spending"]] == ["claude", "codex", "all launchers"]
    assert shown["spending"][-1]["cost_usd"] == pytest.approx(CLAUDE_COST + CODEX_COST)
    assert [s["estimated"] for s in shown["spending"]] == [False, True, True]
    status = _orchard("status", ws.root, "--json", env=env)
    budgets = {b["name"]: b for b in json.loads(status.stdout)["budgets"]}
    assert budgets["max_cost_usd"]["left"] == pytest.approx(1.0 - CLAUDE_COST - CODEX_COST)
    assert 0 < budgets["max_wall_minutes"]["used"] < 60 and budgets["max_wall_minutes"]["left"] > 540
    said = _orchard("status", ws.root, env=env).stdout
    spent = f"${CLAUDE_COST + CODEX_COST:.4f} (estimated)"
    assert f"spent: {spent} of agent cost" in said
    assert f"budget left: max_cost_usd: $0.99 of $1 left ({spent} spent)" in said
    assert "budget left: max_wall_minutes: " in said and " of 600 minutes left (" in said
